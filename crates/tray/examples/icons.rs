//! Writes the app icons (PNG) that tauri.conf.json names, from the same RGBA
//! composer the tray uses at run time:
//!   cargo run -p pcmail-tray --example icons -- src-tauri/icons
use pcmail_tray::icon::{compose, png, SIZE};
use pcmail_tray::Badge;

fn scale(src: &[u8], from: u32, to: u32) -> Vec<u8> {
    // box filter when shrinking, nearest when growing
    let mut out = vec![0u8; (to * to * 4) as usize];
    for y in 0..to {
        for x in 0..to {
            let (x0, x1) = (x * from / to, ((x + 1) * from / to).max(x * from / to + 1));
            let (y0, y1) = (y * from / to, ((y + 1) * from / to).max(y * from / to + 1));
            let mut acc = [0u32; 4];
            let mut n = 0;
            for sy in y0..y1 {
                for sx in x0..x1 {
                    let i = ((sy * from + sx) * 4) as usize;
                    for k in 0..4 {
                        acc[k] += src[i + k] as u32;
                    }
                    n += 1;
                }
            }
            let o = ((y * to + x) * 4) as usize;
            for k in 0..4 {
                out[o + k] = (acc[k] / n) as u8;
            }
        }
    }
    out
}

fn main() {
    let dir = std::env::args().nth(1).unwrap_or_else(|| "src-tauri/icons".into());
    std::fs::create_dir_all(&dir).unwrap();
    let base = compose(&Badge::None);
    for (name, size) in [("icon.png", 128), ("32x32.png", 32), ("128x128.png", 128), ("128x128@2x.png", 256)] {
        let px = if size == SIZE { base.clone() } else { scale(&base, SIZE, size) };
        std::fs::write(format!("{dir}/{name}"), png(&px, size, size)).unwrap();
    }
    // the badge states, for docs/screenshots
    for (name, b) in [
        ("none", Badge::None),
        ("unread", Badge::Unread(3)),
        ("attention", Badge::Attention(2)),
        ("offline", Badge::Offline),
    ] {
        std::fs::write(format!("{dir}/tray-{name}.png"), png(&compose(&b), SIZE, SIZE)).unwrap();
    }
    println!("icons written to {dir}");
}
