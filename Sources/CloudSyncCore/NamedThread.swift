#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// Starts `body` on a new thread that the system knows by `name` (at most 15 bytes show in /proc, `top -H` and
/// `perf`), with `stackSize` bytes of stack when given. Named from inside, through `/proc/thread-self/comm`
/// (proc(5); Glibc's module does not export `pthread_setname_np`). Foundation on Linux gives the OS thread a name
/// set before `Thread.start()` only to `Thread.name`, and its setter names the OS thread only once the creating
/// thread has stored the new thread's handle: a new thread that runs first (a loaded machine) kept its creator's
/// name ("oot.default-qos"), seen once in a few hundred pulls.
public func startThread(named name: String, stackSize: Int? = nil, _ body: @escaping @Sendable () -> Void) {
    let thread = Thread {
        nameCurrentThread(name)
        body()
    }
    if let stackSize { thread.stackSize = stackSize }
    thread.start()
}

/// Gives the calling thread's OS name (the first 15 bytes of `name`); Foundation's `Thread.name` where /proc is
/// missing.
func nameCurrentThread(_ name: String) {
    let fd = open("/proc/thread-self/comm", O_WRONLY | O_CLOEXEC)
    guard fd >= 0 else {
        Thread.current.name = name
        return
    }
    defer { close(fd) }
    let bytes = Array(name.utf8.prefix(15))
    _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
}
