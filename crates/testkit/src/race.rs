//! Work started on several threads at the same moment.

/// Runs `f` on `n` threads released together by a barrier and returns what
/// each returned: races such as several first opens of one new file.
pub fn at_once<T: Send>(n: usize, f: impl Fn() -> T + Sync) -> Vec<T> {
    let start = std::sync::Barrier::new(n);
    std::thread::scope(|s| {
        let threads: Vec<_> = (0..n)
            .map(|_| {
                s.spawn(|| {
                    start.wait();
                    f()
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().expect("a racing thread panicked")).collect()
    })
}
