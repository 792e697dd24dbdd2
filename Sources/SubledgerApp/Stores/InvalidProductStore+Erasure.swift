import Foundation
import Postgres

extension InvalidProductStore {
    /// Erasure rewrites the subscriber's device ids in the invalid-product
    /// reports to `<pseudonym>:device-<n>`, one name per device, so the
    /// listing's report and device counts stay. The devices are those its
    /// events name, opened with the subscriber's key (so this step runs
    /// before the key is destroyed).
    static let erasureStep = ErasureStep(name: "invalid-product devices") { subscriberID, pseudonym, connection in
        let history = try await SubscriberHistory.read(subscriberID, on: connection)
        let devices = Set(history.events.flatMap(\.event.deviceIDs)).sorted()
        guard !devices.isEmpty else { return }
        try await connection.query("""
            WITH devices AS (
                SELECT device_id, n FROM jsonb_array_elements_text(\(JSONArgument.strings(devices))::jsonb) WITH ORDINALITY AS d(device_id, n)
            ), reports AS (
                UPDATE invalid_product_reports AS r SET device_id = \(pseudonym)::text || ':device-' || d.n
                FROM devices AS d WHERE r.device_id = d.device_id
            )
            UPDATE invalid_product_devices AS v SET device_id = \(pseudonym)::text || ':device-' || d.n
            FROM devices AS d WHERE v.device_id = d.device_id
            """)
    }
}
