//! Jobs on the PC. As executor: the runs in progress (written
//! before the process starts, so a restarted executor finds what its
//! predecessor left) and the reports queued until the server takes them.
//! As submitter: the jobs this PC's sessions submitted or joined, and
//! whether the hook has told the session that one ended.

use crate::Cached as _;
use crate::{Result, Store};
use pcmail_core::Millis;
use rusqlite::{params, OptionalExtension, Row};

/// One job this PC executes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobRun {
    pub job_id: String,
    pub runner: String,
    pub command: String,
    pub subject: String,
    pub read_only: bool,
    /// The job as the server offered it (JSON).
    pub job: String,
    /// The executor process that runs it (PID + start time).
    pub owner_pid: i64,
    pub owner_start: Option<i64>,
    /// The job's process (its group leader), once started.
    pub pid: Option<i64>,
    pub pid_start: Option<i64>,
    pub started_at: Millis,
}

fn run_of(r: &Row) -> rusqlite::Result<JobRun> {
    Ok(JobRun {
        job_id: r.get(0)?,
        runner: r.get(1)?,
        command: r.get(2)?,
        subject: r.get(3)?,
        read_only: r.get::<_, i64>(4)? != 0,
        job: r.get(5)?,
        owner_pid: r.get(6)?,
        owner_start: r.get(7)?,
        pid: r.get(8)?,
        pid_start: r.get(9)?,
        started_at: r.get(10)?,
    })
}

const RUN_COLS: &str =
    "job_id, runner, command, subject, read_only, job, owner_pid, owner_start, pid, pid_start, started_at";

/// A queued report (the `job.report` args as JSON).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueuedReport {
    pub job_id: String,
    pub report: String,
    pub queued_at: Millis,
    pub attempts: i64,
}

/// A job a session of this PC submitted or joined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MyJob {
    pub job_id: String,
    pub session: String,
    pub target: String,
    pub command: String,
    pub submitted_at: Millis,
    pub state: String,
    /// The job as last answered (JSON).
    pub job: Option<String>,
    pub ended_at: Option<Millis>,
    pub told_at: Option<Millis>,
}

fn mine_of(r: &Row) -> rusqlite::Result<MyJob> {
    Ok(MyJob {
        job_id: r.get(0)?,
        session: r.get(1)?,
        target: r.get(2)?,
        command: r.get(3)?,
        submitted_at: r.get(4)?,
        state: r.get(5)?,
        job: r.get(6)?,
        ended_at: r.get(7)?,
        told_at: r.get(8)?,
    })
}

const MINE_COLS: &str = "job_id, session, target, command, submitted_at, state, job, ended_at, told_at";

fn is_final(state: &str) -> bool {
    matches!(state, "ok" | "failed" | "timed_out" | "cancelled")
}

impl Store {
    /// Records a run before its process starts.
    pub fn job_run_put(&mut self, r: &JobRun) -> Result<()> {
        self.conn.exec(
            &format!(
                "INSERT OR REPLACE INTO job_runs ({RUN_COLS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)"
            ),
            params![
                r.job_id,
                r.runner,
                r.command,
                r.subject,
                r.read_only as i64,
                r.job,
                r.owner_pid,
                r.owner_start,
                r.pid,
                r.pid_start,
                r.started_at
            ],
        )?;
        Ok(())
    }

    /// The job's process is running: its ids, for a successor to end it.
    pub fn job_run_started(&mut self, job_id: &str, pid: i64, pid_start: Option<i64>) -> Result<()> {
        self.conn
            .exec("UPDATE job_runs SET pid = ?2, pid_start = ?3 WHERE job_id = ?1", params![job_id, pid, pid_start])?;
        Ok(())
    }

    pub fn job_runs(&self) -> Result<Vec<JobRun>> {
        let mut st = self.conn.prepare_cached(&format!("SELECT {RUN_COLS} FROM job_runs ORDER BY started_at"))?;
        let rows = st.query_map([], run_of)?;
        Ok(rows.collect::<std::result::Result<_, _>>()?)
    }

    pub fn job_run(&self, job_id: &str) -> Result<Option<JobRun>> {
        Ok(self
            .conn
            .query_row(&format!("SELECT {RUN_COLS} FROM job_runs WHERE job_id = ?1"), [job_id], run_of)
            .optional()?)
    }

    /// Forgets a run without a report (the server refused its start).
    pub fn job_run_remove(&mut self, job_id: &str) -> Result<()> {
        self.conn.exec("DELETE FROM job_runs WHERE job_id = ?1", [job_id])?;
        Ok(())
    }

    /// Ends a run: its report queued and the run forgotten, in one
    /// transaction (a crash leaves one or the other, never neither).
    pub fn job_finish(&mut self, job_id: &str, report: &str, now: Millis) -> Result<()> {
        self.write(|tx| {
            tx.exec(
                "INSERT OR REPLACE INTO job_reports (job_id, report, queued_at, attempts) VALUES (?1, ?2, ?3, 0)",
                params![job_id, report, now],
            )?;
            tx.exec("DELETE FROM job_runs WHERE job_id = ?1", [job_id])?;
            Ok(())
        })
    }

    /// Reports not yet taken by the server, oldest first.
    pub fn job_reports(&self, limit: usize) -> Result<Vec<QueuedReport>> {
        let mut st = self.conn.prepare_cached(
            "SELECT job_id, report, queued_at, attempts FROM job_reports ORDER BY queued_at LIMIT ?1",
        )?;
        let rows = st.query_map([limit as i64], |r| {
            Ok(QueuedReport { job_id: r.get(0)?, report: r.get(1)?, queued_at: r.get(2)?, attempts: r.get(3)? })
        })?;
        Ok(rows.collect::<std::result::Result<_, _>>()?)
    }

    /// The server took (or finally refused) these reports.
    pub fn job_reports_done(&mut self, job_ids: &[String]) -> Result<()> {
        if job_ids.is_empty() {
            return Ok(());
        }
        self.write(|tx| {
            for id in job_ids {
                tx.exec("DELETE FROM job_reports WHERE job_id = ?1", [id])?;
            }
            Ok(())
        })
    }

    pub fn job_report_failed(&mut self, job_id: &str, error: &str) -> Result<()> {
        self.conn.exec(
            "UPDATE job_reports SET attempts = attempts + 1, last_error = ?2 WHERE job_id = ?1",
            params![job_id, error],
        )?;
        Ok(())
    }

    /// A job a session of this PC submitted (or joined): kept for the hook.
    pub fn job_mine_record(&mut self, j: &MyJob) -> Result<()> {
        self.conn.exec(
            &format!(
                "INSERT INTO jobs_mine ({MINE_COLS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
                 ON CONFLICT(job_id, session) DO UPDATE SET state = excluded.state, job = excluded.job,
                    ended_at = COALESCE(jobs_mine.ended_at, excluded.ended_at),
                    told_at = COALESCE(jobs_mine.told_at, excluded.told_at)"
            ),
            params![j.job_id, j.session, j.target, j.command, j.submitted_at, j.state, j.job, j.ended_at, j.told_at],
        )?;
        Ok(())
    }

    /// The server says a job of this PC ended (`finished` in the poll): each
    /// session that submitted or joined it is told once by the hook.
    pub fn job_mine_finished(
        &mut self,
        job_id: &str,
        target: &str,
        command: &str,
        state: &str,
        job: &str,
        now: Millis,
    ) -> Result<()> {
        if !is_final(state) {
            return Ok(());
        }
        self.write(|tx| {
            let n = tx.exec(
                "UPDATE jobs_mine SET state = ?2, job = ?3, ended_at = COALESCE(ended_at, ?4) WHERE job_id = ?1",
                params![job_id, state, job, now],
            )?;
            if n == 0 {
                // Submitted from elsewhere on this PC without a record: told to whoever asks next.
                tx.exec(
                    &format!("INSERT INTO jobs_mine ({MINE_COLS}) VALUES (?1, '', ?2, ?3, ?4, ?5, ?6, ?4, NULL)"),
                    params![job_id, target, command, now, state, job],
                )?;
            }
            Ok(())
        })
    }

    /// A job this PC's sessions submitted has not ended yet (the poll then
    /// carries a `job` argument so the server can say when it does).
    pub fn jobs_mine_waiting(&self) -> Result<bool> {
        Ok(self.conn.row("SELECT EXISTS (SELECT 1 FROM jobs_mine WHERE ended_at IS NULL)", [], |r| r.get(0))?)
    }

    pub fn jobs_mine(&self, limit: usize) -> Result<Vec<MyJob>> {
        let mut st = self
            .conn
            .prepare_cached(&format!("SELECT {MINE_COLS} FROM jobs_mine ORDER BY submitted_at DESC LIMIT ?1"))?;
        let rows = st.query_map([limit as i64], mine_of)?;
        Ok(rows.collect::<std::result::Result<_, _>>()?)
    }
}

/// One input's progress of a chunked command (see pcmail-client's jobs/chunks.rs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkRow {
    pub fingerprint: String,
    pub input: String,
    pub ok: bool,
    pub failures: u32,
    pub last_failure_at: Option<Millis>,
}

impl Store {
    pub fn chunk_rows(&self, command: &str, subject: &str) -> Result<Vec<ChunkRow>> {
        let mut st = self.conn.prepare_cached(
            "SELECT fingerprint, input, ok, failures, last_failure_at FROM job_chunks WHERE command = ?1 AND subject = ?2",
        )?;
        let rows = st.query_map(params![command, subject], |r| {
            Ok(ChunkRow {
                fingerprint: r.get(0)?,
                input: r.get(1)?,
                ok: r.get::<_, i64>(2)? != 0,
                failures: r.get::<_, i64>(3)? as u32,
                last_failure_at: r.get(4)?,
            })
        })?;
        Ok(rows.collect::<std::result::Result<_, _>>()?)
    }

    pub fn chunk_put(&mut self, command: &str, subject: &str, c: &ChunkRow, now: Millis) -> Result<()> {
        self.conn.exec(
            "INSERT OR REPLACE INTO job_chunks (command, subject, fingerprint, input, ok, failures, last_failure_at, at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            params![command, subject, c.fingerprint, c.input, c.ok as i64, c.failures as i64, c.last_failure_at, now],
        )?;
        Ok(())
    }
}

/// Ended jobs of `session` (or of no known session) not told yet, marked
/// told in the same transaction: each is told once.
pub fn finished_take_untold(tx: &rusqlite::Connection, session: &str, now: Millis, limit: usize) -> Result<Vec<MyJob>> {
    let mut st = tx.prepare_cached(&format!(
        "SELECT {MINE_COLS} FROM jobs_mine WHERE ended_at IS NOT NULL AND told_at IS NULL AND session IN (?1, '')
         ORDER BY ended_at LIMIT ?2"
    ))?;
    let rows: Vec<MyJob> =
        st.query_map(params![session, limit as i64], mine_of)?.collect::<std::result::Result<_, _>>()?;
    for r in &rows {
        tx.exec(
            "UPDATE jobs_mine SET told_at = ?3 WHERE job_id = ?1 AND session = ?2",
            params![r.job_id, r.session, now],
        )?;
    }
    Ok(rows)
}

/// How many ended jobs of `session` wait to be told (without taking them).
pub fn finished_untold_count(conn: &rusqlite::Connection, session: &str) -> Result<i64> {
    Ok(conn.row(
        "SELECT COUNT(*) FROM jobs_mine WHERE ended_at IS NOT NULL AND told_at IS NULL AND session IN (?1, '')",
        [session],
        |r| r.get(0),
    )?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> (tempfile::TempDir, Store) {
        let d = tempfile::tempdir().unwrap();
        let s = Store::open(&d.path().join("s.db")).unwrap();
        (d, s)
    }

    /// Every prompt's hook asks for the ended jobs and the lost leases not
    /// yet told to its session: by index, never by reading every job and
    /// loss this PC ever had (the tables keep them until retention).
    #[test]
    fn the_hooks_untold_questions_are_answered_by_index() {
        let (_d, s) = store();
        let plan = |sql: &str| -> String {
            let mut st = s.conn().prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
            let rows: Vec<String> = st.query_map([], |r| r.get(3)).unwrap().collect::<rusqlite::Result<_>>().unwrap();
            rows.join("; ")
        };
        let take = plan(&format!(
            "SELECT {MINE_COLS} FROM jobs_mine WHERE ended_at IS NOT NULL AND told_at IS NULL AND session IN ('s', '')
             ORDER BY ended_at LIMIT 5"
        ));
        assert!(take.contains("INDEX jobs_mine_untold") && !take.contains("SCAN jobs_mine"), "{take}");
        let count = plan(
            "SELECT COUNT(*) FROM jobs_mine WHERE ended_at IS NOT NULL AND told_at IS NULL AND session IN ('s', '')",
        );
        assert!(count.contains("INDEX jobs_mine_untold") && !count.contains("SCAN jobs_mine"), "{count}");
        let lost = plan(
            "SELECT resource, fence, at, taken_by, reason, event FROM lease_lost WHERE told_at IS NULL AND session = 's'
             ORDER BY at",
        );
        assert!(lost.contains("INDEX lease_lost_untold") && !lost.contains("SCAN lease_lost"), "{lost}");
        // The poll cycle's question, and its answer.
        let waiting = plan("SELECT EXISTS (SELECT 1 FROM jobs_mine WHERE ended_at IS NULL)");
        // A walk of the partial index, which holds only the jobs still waiting.
        assert!(waiting.contains("USING INDEX jobs_mine_waiting"), "{waiting}");
        assert!(!s.jobs_mine_waiting().unwrap());
        let mut s = s;
        let job = |id: &str, ended_at: Option<i64>| MyJob {
            job_id: id.into(),
            session: "s".into(),
            target: "box".into(),
            command: "test".into(),
            submitted_at: 1,
            state: "queued".into(),
            job: None,
            ended_at,
            told_at: None,
        };
        s.job_mine_record(&job("job-1-ended", Some(5))).unwrap();
        assert!(!s.jobs_mine_waiting().unwrap(), "an ended job waits for nothing");
        s.job_mine_record(&job("job-2-waits", None)).unwrap();
        assert!(s.jobs_mine_waiting().unwrap());
    }

    #[test]
    fn a_finished_run_becomes_a_queued_report_in_one_step() {
        let (_d, mut s) = store();
        let run = JobRun {
            job_id: "job-1-aaaaaaaa".into(),
            runner: "pc/1".into(),
            command: "test".into(),
            subject: "app".into(),
            read_only: false,
            job: "{}".into(),
            owner_pid: 1,
            owner_start: None,
            pid: None,
            pid_start: None,
            started_at: 5,
        };
        s.job_run_put(&run).unwrap();
        s.job_run_started(&run.job_id, 77, Some(9)).unwrap();
        assert_eq!(s.job_runs().unwrap()[0].pid, Some(77));
        s.job_finish(&run.job_id, r#"{"state":"ok"}"#, 10).unwrap();
        assert!(s.job_runs().unwrap().is_empty());
        let q = s.job_reports(10).unwrap();
        assert_eq!((q.len(), q[0].report.as_str()), (1, r#"{"state":"ok"}"#));
        s.job_reports_done(std::slice::from_ref(&run.job_id)).unwrap();
        assert!(s.job_reports(10).unwrap().is_empty());
    }

    #[test]
    fn an_ended_job_is_told_once_to_its_session_only() {
        let (_d, mut s) = store();
        for (id, session) in [("job-1-a", "s1"), ("job-2-b", "s2")] {
            s.job_mine_record(&MyJob {
                job_id: id.into(),
                session: session.into(),
                target: "box".into(),
                command: "test".into(),
                submitted_at: 1,
                state: "queued".into(),
                job: None,
                ended_at: None,
                told_at: None,
            })
            .unwrap();
        }
        s.job_mine_finished("job-1-a", "box", "test", "ok", "{}", 50).unwrap();
        s.job_mine_finished("job-2-b", "box", "test", "running", "{}", 50).unwrap();
        assert_eq!(finished_untold_count(s.conn(), "s2").unwrap(), 0);
        let told = s.write(|tx| finished_take_untold(tx, "s1", 60, 10)).unwrap();
        assert_eq!(told.len(), 1);
        assert_eq!(told[0].state, "ok");
        assert!(s.write(|tx| finished_take_untold(tx, "s1", 70, 10)).unwrap().is_empty());
    }
}
