import Postgres

extension InvalidProductStore {
    /// Erasure rewrites the subscriber's device ids in the invalid-product
    /// reports to `<pseudonym>:device-<n>`, one name per device, so the
    /// listing's report and device counts stay. The devices are those its
    /// events name (`deviceId` at any depth: purchases, renewals, restores,
    /// `device_seen`, a transfer's transaction). This reads them as stored
    /// in plain text; once personal fields are sealed in the log, the step
    /// needs them opened with the subscriber's key
    /// (docs/decisions/0004-erasure-by-crypto-shredding.md).
    static let erasureStep = ErasureStep(name: "invalid-product devices") { subscriberID, pseudonym, connection in
        try await connection.query("""
            WITH devices AS (
                SELECT device_id, row_number() OVER (ORDER BY device_id) AS n
                FROM (SELECT DISTINCT found #>> '{}' AS device_id
                      FROM events, jsonb_path_query(events.data, 'strict $.**.deviceId') AS found
                      WHERE events.stream_id = \(SubscriberStreams.streamID(for: subscriberID))) AS named
                WHERE device_id IS NOT NULL
            ), reports AS (
                UPDATE invalid_product_reports AS r SET device_id = \(pseudonym)::text || ':device-' || d.n
                FROM devices AS d WHERE r.device_id = d.device_id
            )
            UPDATE invalid_product_devices AS v SET device_id = \(pseudonym)::text || ':device-' || d.n
            FROM devices AS d WHERE v.device_id = d.device_id
            """)
    }
}
