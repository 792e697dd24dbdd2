import Foundation
import Metrics
import Postgres
import Synchronization

/// Who read or changed which subscriber: one entry per request, kept in a
/// bounded buffer in memory and written to `audit_entries` in batches by
/// `AuditService`, so a request only appends to an array (no round trip, no
/// wait). An entry that finds the buffer full is dropped and counted
/// (`subledger_audit_dropped_total`); entries still in the buffer when the
/// process dies are lost. A graceful shutdown writes them first.
public final class AuditTrail: Sendable {
    /// One audited request. `path` is the route with the subscriber id
    /// written `{id}`: the id itself is only in `subscriberID`, the one
    /// column erasure has to rewrite.
    public struct Entry: Sendable, Equatable {
        public var at: Date
        public var role: String
        /// `APIKeys.fingerprint(of:)` of the key; never the key.
        public var keyFingerprint: String
        /// `Subledger-Actor`, escaped and bounded; nil when not sent.
        public var actor: String?
        public var method: String
        public var path: String
        public var subscriberID: String?
        public var action: String
        public var status: Int

        public init(at: Date, role: String, keyFingerprint: String, actor: String?, method: String, path: String,
                    subscriberID: String?, action: String, status: Int) {
            self.at = at
            self.role = role
            self.keyFingerprint = keyFingerprint
            self.actor = actor
            self.method = method
            self.path = path
            self.subscriberID = subscriberID
            self.action = action
            self.status = status
        }
    }

    /// Whether requests are recorded at all (`SUBLEDGER_AUDIT`).
    public let isEnabled: Bool
    /// Entries held at most before new ones are dropped.
    public let capacity: Int
    private let pending: Mutex<[Entry]>

    static let dropped = Counter(label: "subledger_audit_dropped_total")
    static let written = Counter(label: "subledger_audit_written_total")

    public init(isEnabled: Bool = true, capacity: Int = 50_000) {
        self.isEnabled = isEnabled
        self.capacity = capacity
        pending = Mutex([])
    }

    /// Adds an entry for the next batch; drops it (counted) when the buffer is full.
    public func record(_ entry: Entry) {
        guard isEnabled else { return }
        let kept = pending.withLock { entries in
            guard entries.count < capacity else { return false }
            entries.append(entry)
            return true
        }
        if !kept { Self.dropped.increment() }
    }

    /// How many entries wait to be written.
    public var pendingCount: Int { pending.withLock { $0.count } }

    /// Writes every pending entry (in batches of `batchSize`); returns how
    /// many. Entries whose batch fails go back to the front of the buffer
    /// (as many as fit) and the error is thrown: the next flush tries again.
    ///
    /// Flushes run one at a time: a flush that starts while another is
    /// writing waits for it, so once `flush` returns every entry recorded
    /// before the call is stored (the audit listing relies on it; without the
    /// wait, the background flush could hold the entries, not yet committed,
    /// while the listing found the buffer empty and read the table).
    @discardableResult
    public func flush(to pool: ConnectionPool, batchSize: Int = 1000) async throws -> Int {
        await acquireFlush()
        defer { releaseFlush() }
        return try await flushAlone(to: pool, batchSize: batchSize)
    }

    /// Whether a flush is writing, and the flushes waiting for their turn.
    private let flushTurn = Mutex<(busy: Bool, waiting: [CheckedContinuation<Void, Never>])>((false, []))

    private func acquireFlush() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = flushTurn.withLock { turn -> Bool in
                guard turn.busy else {
                    turn.busy = true
                    return true
                }
                turn.waiting.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
    }

    private func releaseFlush() {
        let next = flushTurn.withLock { turn -> CheckedContinuation<Void, Never>? in
            guard !turn.waiting.isEmpty else {
                turn.busy = false
                return nil
            }
            return turn.waiting.removeFirst()
        }
        next?.resume()
    }

    private func flushAlone(to pool: ConnectionPool, batchSize: Int) async throws -> Int {
        let entries = pending.withLock { entries in
            defer { entries.removeAll(keepingCapacity: true) }
            return entries
        }
        var written = 0
        while written < entries.count {
            let batch = Array(entries[written..<min(entries.count, written + batchSize)])
            do {
                try await AuditStore(pool: pool).insert(batch)
            } catch {
                let unwritten = entries[written...]
                pending.withLock { current in
                    let room = max(0, capacity - current.count)
                    let kept = unwritten.prefix(room)
                    if unwritten.count > kept.count { Self.dropped.increment(by: unwritten.count - kept.count) }
                    current.insert(contentsOf: kept, at: 0)
                }
                throw error
            }
            written += batch.count
            Self.written.increment(by: batch.count)
        }
        return written
    }
}
