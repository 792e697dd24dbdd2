import Foundation
import Postgres
import Synchronization

/// What the database says of its streams' names (`stream_naming`,
/// sql/0034): the scheme in force, and the earlier schemes under which
/// erased subscribers' streams still lie. An erased stream cannot be renamed
/// when the scheme changes (its id is known to nobody), so a fact for an id
/// erased before the change is recognised by the id's name under the earlier
/// scheme — for the earlier schemes this process can compute: the unkeyed
/// one always, a keyed one only with its secret.
public enum StreamNaming {
    /// The earlier schemes holding erased streams that this process computes,
    /// read when the database is prepared (`load`). Empty on every database
    /// whose scheme never changed after an erasure: then nothing is checked.
    private static let earlier = Mutex<[PseudonymScheme]>([])

    /// The condition that the stream `s` has no key row: its subscriber was
    /// erased (every stream written gets its key with its first events).
    static let hasNoKey = """
        NOT EXISTS (SELECT 1 FROM subscriber_keys k WHERE k.pseudonym = substr(s.stream_id, \(SubscriberStreams.prefix.count + 1)))
        """

    /// The schemes the process can compute: its own and the unkeyed one.
    static var computable: [PseudonymScheme] { [.current, .unkeyed] }

    /// Reads `stream_naming` into the process (after any conversion).
    public static func load(on connection: Connection) async throws {
        let names = Set(try await connection.query("SELECT scheme FROM stream_naming WHERE holds_erased AND NOT in_force")
            .map { try $0.decode(String.self, at: 0) })
        let schemes = computable.filter { names.contains($0.name) && $0 != .current }
        earlier.withLock { $0 = schemes }
    }

    /// Of `subscriberIDs`, those erased while named under an earlier scheme.
    static func erasedUnderEarlierNames(_ subscriberIDs: [String], on connection: Connection) async throws -> Set<String> {
        let schemes = earlier.withLock { $0 }
        guard !schemes.isEmpty, !subscriberIDs.isEmpty else { return [] }
        var names: [String: String] = [:]
        for id in subscriberIDs {
            for scheme in schemes { names[SubscriberStreams.prefix + scheme.pseudonym(for: id)] = id }
        }
        // A stream under an earlier name with no key row under it: erased.
        let rows = try await connection.query("""
            SELECT s.stream_id FROM streams s
            WHERE s.stream_id IN (SELECT jsonb_array_elements_text(\(JSONArgument.strings(Array(names.keys)))::jsonb))
              AND EXISTS (SELECT 1 FROM events e WHERE e.stream_number = s.number)
              AND \(unsafeRaw: hasNoKey)
            """)
        return Set(try rows.compactMap { names[try $0.decode(String.self, at: 0)] })
    }

    /// Whether `subscriberID` was erased under an earlier scheme's name.
    static func isErasedUnderEarlierName(_ subscriberID: String, on connection: Connection) async throws -> Bool {
        try await !erasedUnderEarlierNames([subscriberID], on: connection).isEmpty
    }

    /// Marks the loaded ledgers of subscribers without a stream or key that
    /// were erased under an earlier name (a new subscriber costs one probe
    /// then, and nothing on a database without such streams).
    static func markErasedUnderEarlierNames(_ loaded: inout [String: LoadedLedger], on connection: Connection) async throws {
        guard earlier.withLock({ !$0.isEmpty }) else { return }
        let unknown = loaded.values.filter { !$0.exists && $0.key == nil && $0.cachedState == nil }.map(\.subscriberID)
        for subscriberID in try await erasedUnderEarlierNames(unknown, on: connection) {
            loaded[subscriberID]?.erasedUnderEarlierName = true
        }
    }
}
