import Foundation
import Logging
import Postgres
import SubledgerAppTesting
import TestSupport

/// A throwaway primary and a hot standby streaming from it (`pg_basebackup
/// -R`), each on its own Unix socket, for the read-path tests. The primary
/// commits synchronously (no `fsync = off`), like a real one.
final class ReplicatedClusters: Sendable {
    let folder: URL
    let primary: EmbeddedCluster
    let database = "subledger"

    private init(folder: URL) {
        self.folder = folder
        primary = EmbeddedCluster(directory: folder.appendingPathComponent("primary"), databaseName: database,
                                  logger: Logger(label: "replicated-clusters"))
    }

    var standbyFolder: URL { folder.appendingPathComponent("standby") }
    var standbyData: URL { standbyFolder.appendingPathComponent("pgdata") }
    var standbyRun: URL { standbyFolder.appendingPathComponent("run") }

    var primaryConninfo: String { primary.conninfo() }
    var standbyConninfo: String { "host='\(standbyRun.path)' port=5432 user=subledger dbname=\(database)" }

    /// Starts both, the database migrated on the primary and replayed on the standby.
    static func start() async throws -> ReplicatedClusters {
        let folder = URL(fileURLWithPath: "/tmp").appendingPathComponent("subledger-replicas-\(UUID().uuidString.prefix(8))")
        let clusters = ReplicatedClusters(folder: folder)
        do {
            try await clusters.primary.start()
            try await Migrator(migrations: try TestDatabase.migrations()).migrate(conninfo: clusters.primaryConninfo)
            try FileManager.default.createDirectory(at: clusters.standbyRun, withIntermediateDirectories: true)
            try clusters.asOwner(["/bin/chown", "-R", "postgres", clusters.standbyFolder.path], rootOnly: true)
            try clusters.asOwner([Self.binary("pg_basebackup"), "-h", clusters.folder.appendingPathComponent("primary/run").path,
                                  "-p", "5432", "-U", "subledger", "-D", clusters.standbyData.path, "-R", "-X", "stream", "-c", "fast"])
            // The copied settings name the primary's socket folder; the standby's own wins (read last).
            let settings = "unix_socket_directories = '\(clusters.standbyRun.path)'\nhot_standby = on\n"
            let auto = clusters.standbyData.appendingPathComponent("postgresql.auto.conf")
            let handle = try FileHandle(forWritingTo: auto)
            try handle.seekToEnd()
            try handle.write(contentsOf: Data(settings.utf8))
            try handle.close()
            try clusters.asOwner([Self.binary("pg_ctl"), "-D", clusters.standbyData.path, "-l",
                                  clusters.standbyRun.appendingPathComponent("postgres.log").path, "-w", "-t", "60", "start"])
        } catch {
            clusters.stop()
            throw error
        }
        return clusters
    }

    /// Stops both servers and removes their folders.
    func stop() {
        _ = try? asOwner([Self.binary("pg_ctl"), "-D", standbyData.path, "-m", "immediate", "-w", "stop"])
        try? primary.stop()
        try? FileManager.default.removeItem(at: folder)
    }

    /// Runs a PostgreSQL program as the clusters' owner (`postgres` when we are root).
    @discardableResult
    func asOwner(_ command: [String], rootOnly: Bool = false) throws -> String {
        let isRoot = geteuid() == 0
        if rootOnly && !isRoot { return "" }
        let full = isRoot && !rootOnly ? ["/usr/sbin/runuser", "-u", "postgres", "--"] + command : command
        let (status, output) = try ChildProcess.run(full)
        guard status == 0 else {
            throw ClusterCommandFailed(message: "\(command[0]) failed: \(output)")
        }
        return output
    }

    static func binary(_ name: String) -> String {
        let folders = ((try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? [])
            .sorted { (Int($0) ?? 0) > (Int($1) ?? 0) }.map { "/usr/lib/postgresql/\($0)/bin" }
        for folder in folders + (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":").map(String.init)
        where FileManager.default.isExecutableFile(atPath: folder + "/" + name) {
            return folder + "/" + name
        }
        return name
    }
}

struct ClusterCommandFailed: Error, CustomStringConvertible {
    var message: String
    var description: String { message }
}
