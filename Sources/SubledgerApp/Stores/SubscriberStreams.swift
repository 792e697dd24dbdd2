import EventStore
import Foundation
import Ledger
import Postgres

/// How the ledger lives in the event store: one stream per subscriber, event
/// keys scoped to it, and the ownership lookups written beside the events.
public enum SubscriberStreams {
    /// What every subscriber's stream id starts with.
    public static let prefix = "subscriber-"

    /// The stream of a subscriber's facts: named by the subscriber's
    /// pseudonym, never by the id (`SubscriberPseudonyms`).
    public static func streamID(for subscriberID: String) -> String { prefix + SubscriberPseudonyms.pseudonym(for: subscriberID) }

    /// The pseudonym a subscriber stream's id names; nil for other streams.
    public static func pseudonym(ofStream streamID: String) -> String? {
        guard streamID.hasPrefix(prefix) else { return nil }
        return String(streamID.dropFirst(prefix.count))
    }

    /// The store's idempotency keys are global; the ledger's are unique per
    /// subscriber (`expiry:pass@…` can occur for everyone). Digested with
    /// the subscriber's own key, they are scoped by it: two subscribers'
    /// keys are independent random keys, so the same ledger key gives
    /// unrelated digests. And ledger keys name device ids, the subscribers of
    /// a transfer and reminders, so they must be unreadable once the key is
    /// destroyed.
    ///
    /// The first 22 base64url digits (132 bits) of the digest: far from a
    /// collision among all the events a database will hold, and a quarter of
    /// the 79 bytes a key took when it was the stream's pseudonym, a
    /// separator and the whole digest (the unique index's largest column;
    /// sql/0035 cut the keys stored before to this form).
    public static func storeKey(key: SubscriberKey, ledgerKey: String) -> String {
        key.digest(ofLedgerKey: ledgerKey, characters: storeKeyLength)
    }

    /// Characters of a stored idempotency key (`storeKey`).
    static let storeKeyLength = 22

    /// The events to append for ledger events decided for `subscriberID`:
    /// personal fields sealed and idempotency keys digested with `key`.
    package static func newEvents(_ events: [LedgerEvent], subscriberID: String, key: SubscriberKey, source: String) throws -> [NewEvent] {
        let pseudonym = SubscriberPseudonyms.pseudonym(for: subscriberID)
        return try events.map { try newEvent($0, subscriberID: subscriberID, pseudonym: pseudonym, key: key, source: source) }
    }

    /// One of `newEvents`, given the subscriber's pseudonym (computed once
    /// per stream by a caller appending events of several sources).
    package static func newEvent(_ event: LedgerEvent, subscriberID: String, pseudonym: String, key: SubscriberKey,
                                 source: String) throws -> NewEvent {
        let sealed = event.hasPersonalFields
            ? try key.sealingPersonalFields(of: namingCounterpartByPseudonym(event, in: subscriberID), pseudonym: pseudonym) : event
        // The source goes to the metadata only when the event does not hold
        // it: written twice, it was 20 of the 556 bytes of a stored event.
        let stored = try sealed.stored()
        let lookup = OwnershipStore.ownershipKeys(of: event)
        return NewEvent(type: event.type, schemaVersion: stored.schemaVersion, data: stored.data,
                        metadata: EventMetadata(source: event.source == nil ? source : nil),
                        idempotencyKey: event.idempotencyKey.map { storeKey(key: key, ledgerKey: $0) },
                        lookupKey: lookup.transaction, lookupGroup: lookup.original)
    }

    /// A transfer as stored in one party's stream names the other party by
    /// the other's pseudonym (then sealed like every personal field): this
    /// stream's key outlives the other's erasure, and must not open the
    /// other's id then. Reads show the id again while the other's key
    /// exists (`resolvingCounterparts`).
    static func namingCounterpartByPseudonym(_ event: LedgerEvent, in subscriberID: String) -> LedgerEvent {
        switch event {
        case .transferredOut(var transfer) where transfer.fromSubscriberID == subscriberID
                                                  && !SubscriberPseudonyms.isPseudonym(transfer.toSubscriberID):
            transfer.toSubscriberID = SubscriberPseudonyms.pseudonym(for: transfer.toSubscriberID)
            return .transferredOut(transfer)
        case .transferredIn(var transfer) where transfer.toSubscriberID == subscriberID
                                                && !SubscriberPseudonyms.isPseudonym(transfer.fromSubscriberID):
            transfer.fromSubscriberID = SubscriberPseudonyms.pseudonym(for: transfer.fromSubscriberID)
            return .transferredIn(transfer)
        default:
            return event
        }
    }

    /// The events with each transfer's other party named by its id while
    /// that subscriber's key exists, by its pseudonym once it is erased.
    /// One query, and only when a transfer names a pseudonym.
    package static func resolvingCounterparts(_ events: [RecordedLedgerEvent], on connection: Connection) async throws -> [RecordedLedgerEvent] {
        let pseudonyms = Set(events.compactMap(\.event.transferCounterpart).filter { SubscriberPseudonyms.isPseudonym($0) })
        guard !pseudonyms.isEmpty else { return events }
        let rows = try await connection.query("""
            SELECT pseudonym, subscriber_id FROM subscriber_keys
            WHERE pseudonym IN (SELECT jsonb_array_elements_text(\(JSONArgument.strings(Array(pseudonyms)))::jsonb))
            """)
        var ids: [String: String] = [:]
        for row in rows { ids[try row.decode(String.self, at: 0)] = try row.decode(String.self, at: 1) }
        return events.map { recorded in
            var resolved = recorded
            resolved.event = recorded.event.renamingCounterpart(ids)
            return resolved
        }
    }

    /// A stored event with its personal fields opened with the subscriber's
    /// key (`nil`: erased, they stay sealed); an event that does not open is
    /// an error, never a silent change of meaning.
    package static func opened(_ event: RecordedLedgerEvent, key: SubscriberKey?, pseudonym: String) throws -> RecordedLedgerEvent {
        guard let key, event.event.hasPersonalFields else { return event }
        var opened = event
        opened.event = try key.openingPersonalFields(of: event.event, pseudonym: pseudonym)
        return opened
    }

    /// The subscribers whose streams hold `events`, by pseudonym: those
    /// whose keys exist (a live projection's batch resolves them in one
    /// query; an erased subscriber's pseudonym is absent).
    package static func subscribers(of events: [RecordedEvent], on connection: Connection) async throws -> [String: String] {
        var pseudonyms = Set<String>()
        for event in events {
            if let pseudonym = pseudonym(ofStream: event.streamID) { pseudonyms.insert(pseudonym) }
        }
        return try await SubscriberKeys.entries(pseudonyms, on: connection).mapValues(\.subscriberID)
    }

    /// The ledgers of the subscribers whose streams hold `events`: those
    /// whose keys exist by pseudonym (resolved to subscribers in the reading
    /// statement), and erased ones, folded from their streams with sealed
    /// fields sealed, as a rebuild does (`erasedLedger`).
    static func ledgers(of events: [RecordedEvent], on connection: Connection) async throws
        -> (loaded: [String: LoadedLedger], erased: [String: SubscriberLedger]) {
        var pseudonyms: [String] = []
        var seen = Set<String>()
        for event in events {
            guard let pseudonym = pseudonym(ofStream: event.streamID), seen.insert(pseudonym).inserted else { continue }
            pseudonyms.append(pseudonym)
        }
        guard !pseudonyms.isEmpty else { return ([:], [:]) }
        var loaded: [String: LoadedLedger] = [:]
        for (subscriberID, ledger) in try await SubscriberSnapshots.load(pseudonyms: pseudonyms, on: connection) {
            loaded[SubscriberPseudonyms.pseudonym(for: subscriberID)] = ledger
        }
        var erased: [String: SubscriberLedger] = [:]
        for pseudonym in pseudonyms where loaded[pseudonym] == nil {
            erased[pseudonym] = try await erasedLedger(pseudonym: pseudonym, on: connection)
        }
        return (loaded, erased)
    }

    /// An erased subscriber's ledger, named by its pseudonym, folded from
    /// its whole stream with personal fields sealed (no key opens them):
    /// what its read-model rows are computed from, live and in a rebuild.
    package static func erasedLedger(pseudonym: String, on connection: Connection) async throws -> SubscriberLedger {
        let rows = try await connection.query(SubscriberSnapshots.streamEvents(prefix + pseudonym))
        var ledger = SubscriberLedger(subscriberID: pseudonym)
        for row in rows { ledger.apply(try SubscriberSnapshots.recorded(row, from: 0)) }
        return ledger
    }

    /// A stored event as the ledger sees it, its payload read by hand
    /// (`LedgerEvent.decodeFast`: the same event, or the same error).
    package static func ledgerEvent(_ recorded: RecordedEvent) throws -> RecordedLedgerEvent {
        RecordedLedgerEvent(
            position: recorded.position, recordedAt: recorded.recordedAt,
            event: try LedgerEvent.decodeFast(type: recorded.type, schemaVersion: recorded.schemaVersion, data: recorded.data))
    }

    /// The same of a row as a rebuild reads it, its payload in place.
    package static func ledgerEvent(_ row: StreamEventRow) throws -> RecordedLedgerEvent {
        RecordedLedgerEvent(
            position: row.position, recordedAt: row.recordedAt,
            event: try LedgerEvent.decodeFast(type: row.type, schemaVersion: row.schemaVersion, payload: row.data))
    }
}

/// A subscriber's stream as read: the ledger events and the version to
/// expect when appending after them.
struct SubscriberHistory: Sendable {
    var subscriberID: String
    var events: [RecordedLedgerEvent]
    var stored: [RecordedEvent]
    var version: Int64

    init(subscriberID: String, stored: [RecordedEvent], key: SubscriberKey?) throws {
        self.subscriberID = subscriberID
        self.stored = stored
        let pseudonym = SubscriberPseudonyms.pseudonym(for: subscriberID)
        self.events = try stored.map { try SubscriberStreams.opened(try SubscriberStreams.ledgerEvent($0), key: key, pseudonym: pseudonym) }
        self.version = stored.last?.streamVersion ?? 0
        self.key = key
        self.isErased = version > 0 && key == nil
    }

    /// The subscriber's key (nil: no stream yet, or erased).
    var key: SubscriberKey?

    var exists: Bool { version > 0 }
    /// A stream without a key: the subscriber was erased.
    var isErased: Bool

    /// The subscriber's stream and key, read in one snapshot.
    static func read(_ subscriberID: String, from store: EventStore) async throws -> SubscriberHistory {
        try await store.pool.withConnection { connection in
            try await connection.withTransaction(isolation: .repeatableRead) { try await read(subscriberID, on: $0) }
        }
    }

    /// The same on a connection the caller holds (an erasure's transaction):
    /// personal fields opened, a transfer's other party by its id while
    /// that party's key exists.
    static func read(_ subscriberID: String, on connection: Connection) async throws -> SubscriberHistory {
        let key = try await SubscriberKeys.existingKey(for: subscriberID, on: connection)
        var history = try SubscriberHistory(
            subscriberID: subscriberID,
            stored: try await EventStore.readStream(SubscriberStreams.streamID(for: subscriberID), on: connection), key: key)
        history.events = try await SubscriberStreams.resolvingCounterparts(history.events, on: connection)
        if !history.exists && key == nil {
            history.isErased = try await StreamNaming.isErasedUnderEarlierName(subscriberID, on: connection)
        }
        return history
    }
}

extension LedgerEvent {
    /// The other party a transfer names (as stored: by its pseudonym).
    var transferCounterpart: String? {
        switch self {
        case .transferredOut(let transfer): transfer.toSubscriberID
        case .transferredIn(let transfer): transfer.fromSubscriberID
        default: nil
        }
    }

    /// The event with a transfer's other party renamed per `names` (an id
    /// for a pseudonym on reads, a new pseudonym for an old one when streams
    /// are renamed).
    func renamingCounterpart(_ names: [String: String]) -> LedgerEvent {
        switch self {
        case .transferredOut(var transfer):
            if let name = names[transfer.toSubscriberID] { transfer.toSubscriberID = name }
            return .transferredOut(transfer)
        case .transferredIn(var transfer):
            if let name = names[transfer.fromSubscriberID] { transfer.fromSubscriberID = name }
            return .transferredIn(transfer)
        default:
            return self
        }
    }
}

extension RecordedEvent {
    /// The data of `event` (this stored event, decoded) as the API shows it:
    /// the stored data itself when that is the event's JSON object, else the
    /// object encoded again. Personal fields are sealed in what is stored and
    /// shown opened; and at schema version 1 every type is stored as its
    /// object, while the transaction facts are stored as records from version
    /// 2 (`LedgerEvent.stored()`). An unknown newer version's data is shown as
    /// stored either way (`encodedData()` of `.unknown` is that data).
    func shownData(of event: LedgerEvent) throws -> Data {
        event.hasPersonalFields || schemaVersion >= LedgerEventType.recordSchemaVersion ? try event.encodedData() : data
    }
}
