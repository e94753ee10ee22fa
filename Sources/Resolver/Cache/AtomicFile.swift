import DNSCore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Crash-safe whole-file writes and bounded reads of state files with POSIX calls (the cache, the Alt-Svc store,
/// the wide-area registration journal).
public enum AtomicFile {
    /// Replaces the file at `path` with `bytes` so that a crash leaves either the old or the new file, whole.
    ///
    /// Steps: create a uniquely named temporary file in the same directory (rename is only atomic within one file
    /// system) with `O_EXCL` and mode `mode`; write everything; `fsync` it; rename it over `path`; `fsync` the
    /// directory so the rename itself is durable. On failure the temporary file is removed.
    public static func replaceContents(
        of path: String,
        with bytes: [UInt8],
        mode: mode_t = 0o600
    ) throws(CachePersistenceError) {
        let (directory, base) = split(path)
        var temporary = ""
        var fd: Int32 = -1
        for _ in 0..<8 {
            temporary = "\(directory)/.\(base).tmp-\(getpid())-\(UInt32.random(in: .min ... .max))"
            fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode)
            if fd >= 0 || errno != EEXIST { break }
        }
        guard fd >= 0 else { throw failure("cannot create temporary file \(temporary)", path: path) }

        var renamed = false
        defer {
            if !renamed { unlink(temporary) }
        }
        // The umask can only narrow the mode given to open; set it exactly.
        let wrote = fchmod(fd, mode) == 0 && writeAll(fd, bytes) && fsync(fd) == 0
        let failed = wrote ? nil : failure("write and fsync", path: temporary)
        let closed = close(fd) == 0
        if let failed { throw failed }
        guard closed else { throw failure("close", path: temporary) }
        guard rename(temporary, path) == 0 else { throw failure("rename to \(path)", path: temporary) }
        renamed = true

        let directoryFD = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard directoryFD >= 0 else { throw failure("open directory", path: directory) }
        defer { close(directoryFD) }
        guard fsync(directoryFD) == 0 else { throw failure("fsync directory", path: directory) }
    }

    /// Writes all of `bytes` to `fd`, retrying short writes and `EINTR`; false with `errno` set on failure.
    private static func writeAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let written = write(fd, buffer.baseAddress! + offset, buffer.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    return false
                }
                offset += written
            }
            return true
        }
    }

    /// Reads the whole file at `path`, refusing files larger than `maxSize` bytes, and files the daemon did not
    /// write: a symbolic link (`O_NOFOLLOW`), a file owned by another uid than `owner` or writable by group or
    /// others is `untrusted` (a planted cache would inject records; the caller logs and ignores it).
    public static func readContents(
        of path: String, maxSize: Int, owner: uid_t = geteuid()
    ) throws(CachePersistenceError) -> [UInt8] {
        // O_NONBLOCK: a FIFO planted in the file's place must not block the open.
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
        guard fd >= 0 else {
            if errno == ENOENT {
                throw CachePersistenceError(code: .notFound, message: "no such file", path: path)
            }
            if errno == ELOOP {
                throw CachePersistenceError(code: .untrusted, message: "is a symbolic link; not read", path: path)
            }
            throw failure("open", path: path)
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw failure("fstat", path: path) }
        guard (info.st_mode & S_IFMT) == S_IFREG else {
            throw CachePersistenceError(code: .io, message: "not a regular file", path: path)
        }
        guard info.st_uid == owner else {
            throw CachePersistenceError(
                code: .untrusted, message: "owned by uid \(info.st_uid), not the daemon's uid \(owner); not read",
                path: path)
        }
        guard info.st_mode & 0o022 == 0 else {
            throw CachePersistenceError(
                code: .untrusted,
                message: "mode \(String(info.st_mode & 0o7777, radix: 8)) lets group or others write it; not read",
                path: path)
        }
        guard info.st_size <= maxSize else {
            throw CachePersistenceError(
                code: .tooLarge,
                message: "file has \(info.st_size) bytes, limit \(maxSize)",
                path: path
            )
        }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress!, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw failure("read", path: path)
            }
            if count == 0 { break }
            bytes.append(contentsOf: chunk[0..<count])
            // The file may grow after fstat; the limit holds for what is read.
            guard bytes.count <= maxSize else {
                throw CachePersistenceError(code: .tooLarge, message: "file grew past \(maxSize) bytes", path: path)
            }
        }
        return bytes
    }

    /// The directory (`"."` when none) and the last component of `path`.
    public static func split(_ path: String) -> (directory: String, base: String) {
        guard let slash = path.lastIndex(of: "/") else { return (".", path) }
        let directory = String(path[..<slash])
        return (directory.isEmpty ? "/" : directory, String(path[path.index(after: slash)...]))
    }

    private static func failure(_ operation: String, path: String) -> CachePersistenceError {
        let code = errno
        let reason = String(cString: strerror(code))
        return CachePersistenceError(code: .io, message: "\(operation): \(reason) (errno \(code))", path: path)
    }
}
