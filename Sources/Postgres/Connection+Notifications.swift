import CLibPQ

/// A notification received on a channel this connection listens to.
public struct PostgresNotification: Sendable, Equatable {
    public var channel: String
    public var payload: String
    public var processID: Int32
}

// LISTEN/NOTIFY, so consumers wake on an append instead of polling the tables.
extension Connection {
    /// Subscribes this connection to a channel.
    public func listen(_ channel: String) async throws {
        try await run { handle throws(PostgresError) in
            guard let escaped = PQescapeIdentifier(handle, channel, channel.utf8.count) else {
                throw PostgresError(code: .invalidState, message: Connection.errorMessage(handle))
            }
            defer { PQfreemem(escaped) }
            _ = try Connection.execute(PostgresQuery(unsafeSQL: "LISTEN " + String(cString: escaped)), on: handle)
        }
    }

    /// Waits for the next notification without polling the server: the thread
    /// sleeps in `poll(2)` on the socket until data arrives or `timeout` passes.
    /// Data that is not a whole notification (a part of one, a parameter's
    /// new value) sends it back to sleep for what is left of `timeout`; nil
    /// means the time passed with no notification.
    public func waitForNotification(timeout: Duration) async throws -> PostgresNotification? {
        try await run { handle throws(PostgresError) in
            let deadline = ContinuousClock.now + timeout
            while true {
                if let notification = Connection.nextNotification(handle) { return notification }
                let left = deadline - ContinuousClock.now
                guard left > .zero else { return nil }
                let milliseconds = Int32(clamping: left.components.seconds * 1000 + (left.components.attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000)
                guard try Connection.waitReadable(handle, milliseconds: milliseconds) else { continue }
                guard PQconsumeInput(handle) == 1 else {
                    throw PostgresError(code: .connectionLost, message: Connection.errorMessage(handle))
                }
            }
        }
    }

    static func nextNotification(_ handle: OpaquePointer) -> PostgresNotification? {
        guard let notify = PQnotifies(handle) else { return nil }
        defer { PQfreemem(notify) }
        return PostgresNotification(
            channel: String(cString: notify.pointee.relname),
            payload: String(cString: notify.pointee.extra),
            processID: notify.pointee.be_pid)
    }
}
