// Whether a process id names a running process on this host, probed with signal 0: the
// one place that reads kill(pid, 0)'s answer (nothing is sent, only the checks are done).

/**
 * What signal 0 tells of a process id on this host: `running` (we may signal it),
 * `other-user` (EPERM: it runs, as a user we may not signal), or `gone` (ESRCH, or any
 * other failure).
 */
export function processState(pid: number): 'running' | 'other-user' | 'gone' {
  try {
    process.kill(pid, 0);
    return 'running';
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM' ? 'other-user' : 'gone';
  }
}

/** Whether a process with this id runs on this host (EPERM: it does, as another user). */
export function processAlive(pid: number): boolean {
  return processState(pid) !== 'gone';
}
