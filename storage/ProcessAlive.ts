/**
 * Whether a process of this host (this PID namespace) is alive: what the embedded database's
 * lock and the instance registry ask of a pid they found recorded.
 */
export const processAlive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    // EPERM: alive but owned by another user.
    return (error as NodeJS.ErrnoException).code === "EPERM"
  }
}
