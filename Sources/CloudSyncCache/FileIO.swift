#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// An `errno` value as a type.
public struct Errno: Error, Sendable, Hashable {
    public var rawValue: Int32
    public init(_ rawValue: Int32) { self.rawValue = rawValue }
}

/// The system calls through which every byte of cache data goes, injectable to simulate faults
/// (ENOSPC, EIO) in tests. The default is the real calls.
public struct FileIO: Sendable {
    /// Like `pwrite(2)`: writes some prefix of `buffer` at `offset`, returns how many bytes it wrote.
    public var pwrite: @Sendable (_ fd: Int32, _ buffer: UnsafeRawBufferPointer, _ offset: Int64) throws(Errno) -> Int
    /// Like `fdatasync(2)`.
    public var fdatasync: @Sendable (_ fd: Int32) throws(Errno) -> Void
    /// Starts writing the file's dirty pages (`wait` false: `sync_file_range(2)` with `SYNC_FILE_RANGE_WRITE`), or
    /// writes what is still dirty and waits for all of it (`wait` true: `WAIT_BEFORE | WRITE | WAIT_AFTER`), over
    /// the whole file, without committing its metadata. Durable only after an `fdatasync`, which then finds the
    /// data written (see ``CacheWriter/syncTogether(_:io:)``). Does nothing where the C library lacks the call.
    public var writeOut: @Sendable (_ fd: Int32, _ wait: Bool) throws(Errno) -> Void = FileIO.syncFileRange
    /// Like `ftruncate(2)`; sets the (sparse) size of a partial file.
    public var ftruncate: @Sendable (_ fd: Int32, _ size: Int64) throws(Errno) -> Void

    public init(
        pwrite: @escaping @Sendable (Int32, UnsafeRawBufferPointer, Int64) throws(Errno) -> Int,
        fdatasync: @escaping @Sendable (Int32) throws(Errno) -> Void,
        ftruncate: @escaping @Sendable (Int32, Int64) throws(Errno) -> Void
    ) {
        self.pwrite = pwrite
        self.fdatasync = fdatasync
        self.ftruncate = ftruncate
    }

    /// The real system calls, retrying on EINTR.
    public static let system = FileIO(
        pwrite: { fd, buffer, offset throws(Errno) in
            while true {
                let n = Glibc.pwrite(fd, buffer.baseAddress, buffer.count, off_t(offset))
                if n >= 0 { return n }
                if errno != EINTR { throw Errno(errno) }
            }
        },
        fdatasync: { fd throws(Errno) in
            while Glibc.fdatasync(fd) != 0 { if errno != EINTR { throw Errno(errno) } }
        },
        ftruncate: { fd, size throws(Errno) in
            while Glibc.ftruncate(fd, off_t(size)) != 0 { if errno != EINTR { throw Errno(errno) } }
        }
    )

    /// `sync_file_range(fd, 0, 0, flags)` (see ``writeOut``), retried on EINTR. Swift's Glibc module does not
    /// declare the call (it needs `_GNU_SOURCE`), so it is looked up once in the C library by name.
    static let syncFileRange: @Sendable (Int32, Bool) throws(Errno) -> Void = {
        typealias Call = @convention(c) (Int32, Int64, Int64, UInt32) -> Int32
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "sync_file_range") else {
            return { _, _ throws(Errno) in }
        }
        let call = unsafeBitCast(symbol, to: Call.self)
        // <fcntl.h>: SYNC_FILE_RANGE_WAIT_BEFORE 1, SYNC_FILE_RANGE_WRITE 2, SYNC_FILE_RANGE_WAIT_AFTER 4.
        return { fd, wait throws(Errno) in
            let flags: UInt32 = wait ? 1 | 2 | 4 : 2
            while call(fd, 0, 0, flags) != 0 { if errno != EINTR { throw Errno(errno) } }
        }
    }()
}

extension Date {
    /// This time for both the access and the modification time of `futimens(2)` and `utimensat(2)`, to the
    /// nanosecond; a time no file system holds (not finite, beyond ±2^62 s) is clamped rather than trapping.
    var fileTimes: [timespec] {
        let seconds = timeIntervalSince1970.isFinite ? min(max(timeIntervalSince1970, -0x1p62), 0x1p62) : 0
        let whole = seconds.rounded(.down)
        let time = timespec(tv_sec: Int(whole), tv_nsec: min(Int((seconds - whole) * 1e9), 999_999_999))
        return [time, time]
    }
}
