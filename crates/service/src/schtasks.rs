//! Reading `schtasks /Query /V` output. The LIST form's field names are
//! localised (English and Japanese known here); the CSV form with `/NH` has
//! the same columns in the same order on every locale, so that is what
//! [`crate::Manager`] asks for.

/// What pcmail needs from a task's query output.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TaskInfo {
    pub task_name: String,
    /// "Ready", "Running", "Disabled" (localised).
    pub status: String,
    pub last_run_time: String,
    /// `LastTaskResult` as an unsigned 32-bit code.
    pub last_result: Option<u32>,
    pub task_to_run: String,
}

/// A result as schtasks prints it: decimal (`267009`), negative decimal for
/// HRESULTs (`-2147024894`) or hex (`0x41301`).
pub fn parse_code(s: &str) -> Option<u32> {
    let s = s.trim();
    if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        return u32::from_str_radix(h, 16).ok();
    }
    if let Ok(v) = s.parse::<u32>() {
        return Some(v);
    }
    s.parse::<i32>().ok().map(|v| v as u32)
}

/// `schtasks /Query /TN pcmail /FO LIST /V`. When the task has several
/// triggers schtasks repeats the block; the first one is read.
pub fn parse_list(text: &str) -> Option<TaskInfo> {
    let mut info = TaskInfo::default();
    let mut seen_name = false;
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else { continue };
        let (key, value) = (key.trim(), value.trim());
        match key {
            "TaskName" | "タスク名" => {
                if seen_name {
                    break; // the next block
                }
                seen_name = true;
                info.task_name = value.to_string();
            }
            "Status" | "状態" => info.status = value.to_string(),
            "Last Run Time" | "前回の実行時刻" => info.last_run_time = value.to_string(),
            "Last Result" | "前回の結果" => info.last_result = parse_code(value),
            "Task To Run" | "実行するタスク" => info.task_to_run = value.to_string(),
            _ => {}
        }
    }
    seen_name.then_some(info)
}

fn csv_fields(line: &str) -> Vec<String> {
    let mut out = vec![];
    let mut cur = String::new();
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' if quoted && chars.peek() == Some(&'"') => {
                cur.push('"');
                chars.next();
            }
            '"' => quoted = !quoted,
            ',' if !quoted => out.push(std::mem::take(&mut cur)),
            c => cur.push(c),
        }
    }
    out.push(cur);
    out
}

/// `schtasks /Query /TN pcmail /FO CSV /V /NH`: HostName, TaskName, Next Run
/// Time, Status, Logon Mode, Last Run Time, Last Result, Author, Task To Run…
/// A header row (without /NH) is skipped: its Last Result is not a number.
pub fn parse_csv(text: &str) -> Option<TaskInfo> {
    text.lines().map(csv_fields).filter(|f| f.len() > 8).find_map(|f| {
        let code = parse_code(&f[6])?;
        Some(TaskInfo {
            task_name: f[1].clone(),
            status: f[3].clone(),
            last_run_time: f[5].clone(),
            last_result: Some(code),
            task_to_run: f[8].clone(),
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_in_every_form_schtasks_prints() {
        assert_eq!(parse_code("267009"), Some(0x41301));
        assert_eq!(parse_code(" 0x41303 "), Some(267011));
        assert_eq!(parse_code("-2147024894"), Some(0x8007_0002));
        assert_eq!(parse_code("0"), Some(0));
        assert_eq!(parse_code("N/A"), None);
    }

    #[test]
    fn csv_quotes_and_header() {
        let t = "\"HostName\",\"TaskName\",\"Next Run Time\",\"Status\",\"Logon Mode\",\"Last Run Time\",\"Last Result\",\"Author\",\"Task To Run\"\n\
                 \"PC1\",\"\\pcmail\",\"N/A\",\"Ready\",\"Interactive only\",\"11/30/2026 9:00:00 AM\",\"1\",\"PC1\\a\",\"\"\"C:\\a, b\\pcmail.exe\"\" daemon\"\n";
        let i = parse_csv(t).unwrap();
        assert_eq!(i.last_result, Some(1));
        assert_eq!(i.task_to_run, "\"C:\\a, b\\pcmail.exe\" daemon");
    }
}
