import Foundation
import Logging

/// A private PostgreSQL cluster under a folder of ours, used when no
/// `DATABASE_URL` is given: `initdb` on first use, started on a Unix socket in
/// that folder (no TCP port to collide with), reused next time.
///
/// Layout: `<directory>/pgdata` (the cluster), `<directory>/run` (socket, log).
/// PostgreSQL refuses to run as root; then the cluster belongs to the
/// unprivileged `postgres` system user and its commands run through `runuser`.
public final class EmbeddedCluster: Sendable {
    public let directory: URL
    public let databaseName: String
    /// Trades durability for speed (fsync off): for test clusters only.
    public let isEphemeral: Bool
    let logger: Logger
    static let port = 5432
    static let superuser = "subledger"

    public init(directory: URL, databaseName: String = "subledger", isEphemeral: Bool = false,
                logger: Logger = Logger(label: "subledger.embedded-postgres")) {
        self.directory = directory.standardizedFileURL
        self.databaseName = databaseName
        self.isEphemeral = isEphemeral
        self.logger = logger
    }

    var dataDirectory: URL { directory.appendingPathComponent("pgdata", isDirectory: true) }
    var runDirectory: URL { directory.appendingPathComponent("run", isDirectory: true) }
    var logFile: URL { runDirectory.appendingPathComponent("postgres.log") }

    /// The conninfo of a database in this cluster.
    public func conninfo(database: String? = nil) -> String {
        "host=\(Self.quote(runDirectory.path)) port=\(Self.port) user=\(Self.superuser) dbname=\(Self.quote(database ?? databaseName))"
    }

    /// Starts the cluster if it is not running and makes sure the database
    /// exists. Returns true when this call started the server.
    @discardableResult
    public func start() async throws -> Bool {
        let binaries = try PostgresBinaries.locate()
        let owner = try ClusterOwner.current()
        try prepareDirectories(owner: owner)
        if !FileManager.default.fileExists(atPath: dataDirectory.appendingPathComponent("PG_VERSION").path) {
            logger.info("creating the embedded PostgreSQL cluster", metadata: ["db.data_dir": "\(dataDirectory.path)"])
            try run(binaries.initdb, [
                "-D", dataDirectory.path, "-U", Self.superuser, "--auth=trust",
                "--encoding=UTF8", "--no-locale", "--no-sync",
            ], as: owner)
            try appendInclude(owner: owner)
        }
        try writeSettings(owner: owner)
        var started = false
        if !isRunning(binaries, owner: owner) {
            logger.info("starting the embedded PostgreSQL cluster", metadata: ["db.data_dir": "\(dataDirectory.path)"])
            do {
                try run(binaries.pgCtl, ["-D", dataDirectory.path, "-l", logFile.path, "-w", "-t", "60", "start"], as: owner)
                started = true
            } catch {
                // Another process may have started it at the same moment.
                guard isRunning(binaries, owner: owner) else { throw error }
            }
        }
        try await createDatabaseIfNeeded(databaseName)
        return started
    }

    /// Stops the server (fast shutdown: sessions are ended, nothing is lost).
    public func stop() throws {
        let binaries = try PostgresBinaries.locate()
        let owner = try ClusterOwner.current()
        guard isRunning(binaries, owner: owner) else { return }
        logger.info("stopping the embedded PostgreSQL cluster", metadata: ["db.data_dir": "\(dataDirectory.path)"])
        try run(binaries.pgCtl, ["-D", dataDirectory.path, "-m", "fast", "-w", "stop"], as: owner)
    }

    /// Restarts the server, ending every session (used by the reconnection tests).
    public func restart() throws {
        let binaries = try PostgresBinaries.locate()
        let owner = try ClusterOwner.current()
        try run(binaries.pgCtl, ["-D", dataDirectory.path, "-l", logFile.path, "-m", "fast", "-w", "restart"], as: owner)
    }

    public func createDatabaseIfNeeded(_ name: String, template: String? = nil) async throws {
        let connection = try await connectWhenReady(database: "postgres")
        defer { connection.close() }
        let exists = try await connection.query("SELECT 1 FROM pg_database WHERE datname = \(name)")
        guard exists.isEmpty else { return }
        var statement = "CREATE DATABASE " + Self.quoteIdentifier(name)
        if let template { statement += " TEMPLATE " + Self.quoteIdentifier(template) }
        do {
            try await connection.execute(unsafeSQL: statement)
        } catch let error as PostgresError where error.sqlState == SQLState("42P04") {
            // Created concurrently by another process: fine.
        }
    }

    private func connectWhenReady(database: String) async throws -> Connection {
        var attempt = 0
        while true {
            do {
                return try await Connection.connect(to: conninfo(database: database), logger: logger)
            } catch let error as PostgresError where attempt < 50 {
                attempt += 1
                logger.debug("embedded cluster not ready yet", metadata: ["error": "\(error)"])
                try await Task.sleep(for: .milliseconds(100))
            }
        }
    }

    // MARK: Files and processes

    private func prepareDirectories(owner: ClusterOwner) throws {
        let fileManager = FileManager.default
        try fileManager.createDirectory(at: directory, withIntermediateDirectories: true)
        for folder in [dataDirectory, runDirectory] where !fileManager.fileExists(atPath: folder.path) {
            try fileManager.createDirectory(at: folder, withIntermediateDirectories: true)
            try owner.take(folder, mode: folder == dataDirectory ? 0o700 : 0o755)
        }
        if let user = owner.user, !owner.canTraverse(directory) {
            throw EmbeddedClusterError(
                message: "the system user \(user) that runs the embedded cluster cannot reach \(directory.path); "
                    + "set SUBLEDGER_DATA_DIR to a folder it can traverse (e.g. under /var/lib or /tmp) or set DATABASE_URL")
        }
    }

    private func appendInclude(owner: ClusterOwner) throws {
        let configuration = dataDirectory.appendingPathComponent("postgresql.conf")
        let handle = try FileHandle(forWritingTo: configuration)
        defer { try? handle.close() }
        try handle.seekToEnd()
        try handle.write(contentsOf: Data("\ninclude_if_exists = 'subledger.conf'\n".utf8))
    }

    /// Rewritten on every start so a moved folder still works.
    private func writeSettings(owner: ClusterOwner) throws {
        var lines = [
            "listen_addresses = ''",
            "unix_socket_directories = '\(runDirectory.path.replacingOccurrences(of: "'", with: "''"))'",
            "port = \(Self.port)",
        ]
        if isEphemeral {
            // Test runs open many small pools at once and leave them to process exit.
            lines += ["max_connections = 1000", "fsync = off", "synchronous_commit = off", "full_page_writes = off"]
        } else {
            lines += ["max_connections = 200"]
        }
        let file = dataDirectory.appendingPathComponent("subledger.conf")
        try Data((lines.joined(separator: "\n") + "\n").utf8).write(to: file)
        try owner.take(file, mode: 0o600)
    }

    private func isRunning(_ binaries: PostgresBinaries, owner: ClusterOwner) -> Bool {
        (try? run(binaries.pgCtl, ["-D", dataDirectory.path, "status"], as: owner, quiet: true)) != nil
    }

    @discardableResult
    private func run(_ executable: String, _ arguments: [String], as owner: ClusterOwner, quiet: Bool = false) throws -> String {
        let command = owner.user.map { [owner.runuser, "-u", $0, "--", executable] + arguments } ?? [executable] + arguments
        let (status, text) = try ChildProcess.run(command)
        guard status == 0 else {
            if !quiet {
                logger.error("PostgreSQL command failed", metadata: ["command": "\((executable as NSString).lastPathComponent)", "output": "\(text)"])
            }
            throw EmbeddedClusterError(
                message: "\((executable as NSString).lastPathComponent) failed (exit \(status)): "
                    + text.trimmingCharacters(in: .whitespacesAndNewlines))
        }
        return text
    }

    static func quote(_ value: String) -> String {
        "'" + value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "'", with: "\\'") + "'"
    }

    static func quoteIdentifier(_ name: String) -> String {
        "\"" + name.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }
}

public struct EmbeddedClusterError: Error, CustomStringConvertible, Sendable {
    public var message: String
    public var description: String { message }
}

/// Where the server programs are: on PATH, else the newest `/usr/lib/postgresql/N/bin`.
struct PostgresBinaries {
    var initdb: String
    var pgCtl: String

    static func locate(environment: [String: String] = ProcessInfo.processInfo.environment) throws -> PostgresBinaries {
        var folders = (environment["PATH"] ?? "").split(separator: ":").map(String.init)
        let root = "/usr/lib/postgresql"
        let versions = ((try? FileManager.default.contentsOfDirectory(atPath: root)) ?? [])
            .compactMap { Int($0) }.sorted(by: >)
        folders += versions.map { "\(root)/\($0)/bin" }
        for folder in folders {
            let initdb = folder + "/initdb", pgCtl = folder + "/pg_ctl"
            if FileManager.default.isExecutableFile(atPath: initdb), FileManager.default.isExecutableFile(atPath: pgCtl) {
                return PostgresBinaries(initdb: initdb, pgCtl: pgCtl)
            }
        }
        throw EmbeddedClusterError(
            message: "no PostgreSQL server found (initdb and pg_ctl are not on PATH nor under /usr/lib/postgresql/*/bin): "
                + "install it with `apt-get install -y postgresql`, or set DATABASE_URL to an existing database")
    }
}

/// Who owns and runs the cluster: ourselves, or `postgres` when we are root.
struct ClusterOwner {
    var user: String?
    var uid: uid_t
    var gid: gid_t
    var runuser: String

    static func current() throws -> ClusterOwner {
        guard geteuid() == 0 else { return ClusterOwner(user: nil, uid: geteuid(), gid: getegid(), runuser: "") }
        guard let entry = getpwnam("postgres") else {
            throw EmbeddedClusterError(
                message: "running as root, the embedded cluster needs the unprivileged system user `postgres` "
                    + "(created by `apt-get install -y postgresql`)")
        }
        let runuser = ["/usr/sbin/runuser", "/sbin/runuser", "/usr/bin/runuser"]
            .first { FileManager.default.isExecutableFile(atPath: $0) }
        guard let runuser else {
            throw EmbeddedClusterError(message: "running as root needs `runuser` (package util-linux) to start PostgreSQL as `postgres`")
        }
        return ClusterOwner(user: "postgres", uid: entry.pointee.pw_uid, gid: entry.pointee.pw_gid, runuser: runuser)
    }

    func take(_ url: URL, mode: Int) throws {
        if user != nil, chown(url.path, uid, gid) != 0 {
            throw EmbeddedClusterError(message: "cannot hand \(url.path) to the postgres user (errno \(errno))")
        }
        chmod(url.path, mode_t(mode))
    }

    /// Whether the owner can search every folder from `/` down to `url`.
    func canTraverse(_ url: URL) -> Bool {
        guard user != nil else { return true }
        var path = ""
        for component in url.pathComponents.dropFirst() {
            path += "/" + component
            var info = stat()
            guard stat(path, &info) == 0 else { return false }
            let mode = info.st_mode
            let allowed = info.st_uid == uid ? mode & S_IXUSR != 0
                : info.st_gid == gid ? mode & S_IXGRP != 0
                : mode & S_IXOTH != 0
            if !allowed { return false }
        }
        return true
    }
}
