import Foundation
import Metrics
import Postgres
import Synchronization

/// Who read or changed which subscriber: one entry per request, kept in a
/// bounded buffer in memory and written to `audit_entries` in batches by
/// `AuditService`, so a request only appends to an array (no round trip).
///
/// No entry is dropped. An audited request first takes a place in the
/// buffer (`reserve`), before it runs; when the buffer is full (the database
/// has not taken the entries for a while) it waits for room, up to
/// `admissionWait`, and is then refused with 503 without having run: a
/// request that ran always has a place for its entry. Waits and refusals are
/// counted (`subledger_audit_waits_total`, `subledger_audit_refused_total`).
/// Entries still in the buffer when the process dies are lost; a graceful
/// shutdown writes them first.
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
    /// Places in the buffer: entries waiting, entries being written and
    /// places taken by requests still running.
    public let capacity: Int
    /// How long a request waits for a place before it is refused.
    public let admissionWait: Duration

    private struct Buffer {
        var entries: [Entry] = []
        /// Entries a flush took and has not written yet.
        var flushing = 0
        /// Places taken by requests that have not recorded their entry yet.
        var reserved = 0
        var waiters: [(id: UInt64, continuation: CheckedContinuation<Bool, Never>)] = []
        var nextWaiter: UInt64 = 0

        var occupied: Int { entries.count + flushing + reserved }

        /// Gives freed places to the oldest waiters; returns whom to wake.
        mutating func admitWaiters(capacity: Int) -> [CheckedContinuation<Bool, Never>] {
            var admitted: [CheckedContinuation<Bool, Never>] = []
            while !waiters.isEmpty, occupied < capacity {
                reserved += 1
                admitted.append(waiters.removeFirst().continuation)
            }
            return admitted
        }
    }

    private let buffer: Mutex<Buffer>

    static let waits = Counter(label: "subledger_audit_waits_total")
    static let refused = Counter(label: "subledger_audit_refused_total")
    static let written = Counter(label: "subledger_audit_written_total")

    public init(isEnabled: Bool = true, capacity: Int = 50_000, admissionWait: Duration = .seconds(5)) {
        self.isEnabled = isEnabled
        self.capacity = max(1, capacity)
        self.admissionWait = admissionWait
        buffer = Mutex(Buffer())
    }

    /// Takes a place in the buffer for the entry of a request about to run,
    /// waiting for room up to `admissionWait`; false: none came (nothing
    /// may run). Every `true` is followed by exactly one `record`.
    public func reserve() async -> Bool {
        guard isEnabled else { return true }
        let now = buffer.withLock { buffer -> Bool in
            guard buffer.waiters.isEmpty, buffer.occupied < capacity else { return false }
            buffer.reserved += 1
            return true
        }
        if now { return true }
        Self.waits.increment()
        let wait = admissionWait
        let admitted = await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            let id = buffer.withLock { buffer -> UInt64? in
                // Room may have come since the first look.
                if buffer.waiters.isEmpty, buffer.occupied < capacity {
                    buffer.reserved += 1
                    return nil
                }
                buffer.nextWaiter += 1
                buffer.waiters.append((buffer.nextWaiter, continuation))
                return buffer.nextWaiter
            }
            guard let id else { return continuation.resume(returning: true) }
            Task { [self] in
                try? await Task.sleep(for: wait)
                let expired = buffer.withLock { buffer -> CheckedContinuation<Bool, Never>? in
                    guard let index = buffer.waiters.firstIndex(where: { $0.id == id }) else { return nil }
                    return buffer.waiters.remove(at: index).continuation
                }
                expired?.resume(returning: false)
            }
        }
        if !admitted { Self.refused.increment() }
        return admitted
    }

    /// Adds the entry of a request that `reserve`d its place.
    public func record(_ entry: Entry) {
        guard isEnabled else { return }
        buffer.withLock { buffer in
            buffer.reserved = max(0, buffer.reserved - 1)
            buffer.entries.append(entry)
        }
    }

    /// How many entries wait to be written.
    public var pendingCount: Int { buffer.withLock { $0.entries.count } }

    /// How many requests wait for a place.
    public var waitingCount: Int { buffer.withLock { $0.waiters.count } }

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
        let entries = buffer.withLock { buffer in
            defer { buffer.entries.removeAll(keepingCapacity: true) }
            buffer.flushing += buffer.entries.count
            return buffer.entries
        }
        var written = 0
        while written < entries.count {
            let batch = Array(entries[written..<min(entries.count, written + batchSize)])
            do {
                try await AuditStore(pool: pool).insert(batch)
            } catch {
                // Back to the front of the buffer: their places were kept.
                let unwritten = entries[written...]
                buffer.withLock { buffer in
                    buffer.flushing -= unwritten.count
                    buffer.entries.insert(contentsOf: unwritten, at: 0)
                }
                throw error
            }
            written += batch.count
            Self.written.increment(by: batch.count)
            let admitted = buffer.withLock { buffer in
                buffer.flushing -= batch.count
                return buffer.admitWaiters(capacity: capacity)
            }
            for continuation in admitted { continuation.resume(returning: true) }
        }
        return written
    }
}
