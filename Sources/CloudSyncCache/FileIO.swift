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
}
