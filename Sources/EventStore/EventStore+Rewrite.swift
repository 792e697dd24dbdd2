import Foundation
import Postgres

/// One stored event rewritten in place by a conversion: found by its
/// position, given new data and schema version, and a new id when `eventID`
/// is set (kept otherwise).
public struct EventRewrite: Encodable, Sendable {
    public var position: Int64
    public var data: String
    public var schemaVersion: Int
    public var eventID: String?

    public init(position: Int64, data: String, schemaVersion: Int, eventID: String? = nil) {
        self.position = position
        self.data = data
        self.schemaVersion = schemaVersion
        self.eventID = eventID
    }

    enum CodingKeys: String, CodingKey {
        case position, data
        case schemaVersion = "schema_version"
        case eventID = "event_id"
    }
}

extension EventStore {
    /// Rewrites events of `streamID` in place, in one statement on a
    /// connection the caller holds (its transaction). The stream is named as
    /// well as each position: the log has no b-tree of positions (sql/0045),
    /// and the stream's `(stream_number, stream_version)` index finds its
    /// events.
    public static func rewrite(_ rewrites: [EventRewrite], inStream streamID: String, on connection: Connection) async throws {
        guard !rewrites.isEmpty else { return }
        let values = PostgresJSON(data: try JSONEncoder().encode(rewrites))
        try await connection.query("""
            UPDATE events AS e SET data = x.data::jsonb, schema_version = x.schema_version,
                event_id = coalesce(x.event_id::uuid, e.event_id)
            FROM jsonb_to_recordset(\(values)::jsonb) AS x(position bigint, data text, schema_version integer, event_id text)
            WHERE e.stream_number = (SELECT number FROM streams WHERE stream_id = \(streamID)) AND e.position = x.position
            """)
    }
}
