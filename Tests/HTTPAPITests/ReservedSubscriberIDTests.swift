import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Ledger
import Postgres
@testable import SubledgerApp
import SubledgerAppTesting
import TestSupport
import Testing

/// An id of a pseudonym's shape (`ps-` and 32 lowercase hexadecimal digits)
/// is refused as a subscriber id wherever one comes in: written, it would
/// name rows an erased subscriber's pseudonym names, and its key row would
/// block the erasure of the subscriber whose pseudonym it is.
@Suite("Reserved subscriber ids")
struct ReservedSubscriberIDTests {
    /// Every route taking a subscriber id, with a key its role allows.
    static func routes(_ id: String) -> [(method: HTTPRequest.Method, uri: String, body: String?, key: String)] {
        let restore = #"{"transactions": [{"transactionId": "r1", "productId": "com.example.pass.30d", "purchaseDate": "2025-01-01T00:00:00Z"}]}"#
        return [
            (.post, "/v1/subscribers/\(id)/events", purchaseJSON("f-\(id)"), Keys.ingest),
            (.post, "/v1/subscribers/\(id)/restore", restore, Keys.ingest),
            (.post, "/v1/subscribers/\(id)/receipts", #"{"receiptData": "AAAA"}"#, Keys.ingest),
            (.post, "/v1/subscribers/\(id)/grants", #"{"entitlement": "pro", "duration": "P1D", "reason": "x"}"#, Keys.admin),
            (.delete, "/v1/subscribers/\(id)/grants/g1", #"{"reason": "x"}"#, Keys.admin),
            (.post, "/v1/subscribers/\(id)/appstore/refresh", "{}", Keys.admin),
            (.get, "/v1/subscribers/\(id)", nil, Keys.support),
            (.get, "/v1/subscribers/\(id)/history", nil, Keys.support),
            (.get, "/v1/subscribers/\(id)/explain", nil, Keys.support),
            (.delete, "/v1/subscribers/\(id)", #"{"reason": "x"}"#, Keys.admin),
            (.get, "/v1/changes?subscriberId=\(id)", nil, Keys.support),
            (.get, "/v1/reminders?subscriberId=\(id)", nil, Keys.support),
            (.get, "/v1/appstore/notifications?subscriberId=\(id)", nil, Keys.support),
        ]
    }

    @Test func everyRouteRefusesAnIdOfThePseudonymsShape() async throws {
        try await withApp { client, dependencies in
            let victim = "victim-" + UUID().uuidString.lowercased()
            let pseudonym = SubscriberPseudonyms.pseudonym(for: victim)
            #expect(try await client.post("/v1/subscribers/\(victim)/events", purchaseJSON("v-1")).status == .created)
            for route in Self.routes(pseudonym) {
                var headers = Keys.bearer(route.key)
                headers[.contentType] = "application/json"
                let response = try await client.execute(uri: route.uri, method: route.method, headers: headers,
                                                        body: route.body.map { ByteBuffer(string: $0) })
                #expect(response.status == .badRequest, "\(route.method) \(route.uri): \(response.status) \(response.text)")
                #expect(response.error.code == "invalid_field" && response.error.field == "subscriberId", "\(route.uri): \(response.text)")
                #expect(response.text.contains("reserved shape of a pseudonym"), "\(route.uri): \(response.text)")
            }
            // Nothing was stored under the pseudonym, and the victim is still erasable.
            #expect(try await dependencies.pool.query("SELECT 1 FROM subscriber_keys WHERE subscriber_id = \(pseudonym)").isEmpty)
            #expect(try await client.delete("/v1/subscribers/\(victim)", #"{"reason": "x"}"#, key: Keys.admin).status == .ok)
        }
    }

    /// Near misses are ordinary ids: the shape is exact.
    @Test func idsCloseToTheShapeAreAccepted() async throws {
        let hex = String(repeating: "0123456789abcdef", count: 2)
        let near = ["ps-" + hex.dropLast(), "ps-" + hex + "0", "ps-" + hex.uppercased(), "PS-" + hex, "ps_" + hex,
                    "ps-" + hex.dropLast() + "g", "xps-" + hex.dropLast()]
        try await withApp { client, _ in
            for (index, id) in near.enumerated() {
                let response = try await client.post("/v1/subscribers/\(id)/events", purchaseJSON("near-\(index)"))
                #expect(response.status == .created, "\(id): \(response.text)")
            }
        }
    }

    /// The check in `InputLimits` (the Ledger module, below the pseudonyms)
    /// and `SubscriberPseudonyms.isPseudonym` agree: on real pseudonyms, and
    /// on strings one edit away from one.
    @Test func theReservedShapeIsThePseudonyms() {
        var generator = SplitMix64(seed: 41)
        let alphabet = Array("0123456789abcdefABCDEFgps-_:é")
        for index in 0..<2000 {
            let pseudonym = SubscriberPseudonyms.pseudonym(for: "s\(index)-\(generator.next())")
            #expect(InputLimits.hasPseudonymShape(pseudonym) && SubscriberPseudonyms.isPseudonym(pseudonym))
            var edited = Array(pseudonym)
            let position = Int(generator.next() % UInt64(edited.count + 1))
            let character = alphabet[Int(generator.next() % UInt64(alphabet.count))]
            switch generator.next() % 3 {
            case 0: if position < edited.count { edited[position] = character }
            case 1: edited.insert(character, at: position)
            default: if position < edited.count { edited.remove(at: position) }
            }
            let text = String(edited)
            #expect(InputLimits.hasPseudonymShape(text) == SubscriberPseudonyms.isPseudonym(text), "\(text)")
        }
    }

    /// The import refuses such a line with its number and why, and imports the rest.
    @Test func theImportRejectsTheLineAndGoesOn() async throws {
        let dependencies = try await makeDependencies()
        defer { Task { [pool = dependencies.pool] in await pool.close() } }
        let reserved = SubscriberPseudonyms.pseudonym(for: "someone")
        let text = """
            {"subscriberId": "imp-1", "type": "purchase", "transactionId": "ri1", "productId": "com.example.level2", "purchaseDate": "2025-01-01T00:00:00Z"}
            {"subscriberId": "\(reserved)", "type": "purchase", "transactionId": "ri2", "productId": "com.example.level2", "purchaseDate": "2025-01-01T00:00:00Z"}
            {"subscriberId": "imp-3", "type": "purchase", "transactionId": "ri3", "productId": "com.example.level2", "purchaseDate": "2025-01-01T00:00:00Z"}
            """
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("import-\(UUID().uuidString).ndjson")
        try Data(text.utf8).write(to: url)
        defer { try? FileManager.default.removeItem(at: url) }
        let handle = try FileHandle(forReadingFrom: url)
        defer { try? handle.close() }
        let importer = Importer(pool: dependencies.pool, store: dependencies.store, catalog: dependencies.catalog.catalog,
                                restorePolicy: .transfer, logger: dependencies.logger)
        let summary = try await importer.importLines(Array(NDJSONReader(handle: handle)))
        #expect(summary.imported == 2)
        #expect(summary.rejected.map(\.line) == [2])
        let reason = summary.rejected.first?.reason ?? ""
        #expect(reason.contains("invalid_field") && reason.contains("subscriberId") && reason.contains("reserved shape of a pseudonym"), "\(reason)")
        #expect(try await dependencies.pool.query("SELECT 1 FROM subscriber_keys WHERE subscriber_id = \(reserved)").isEmpty)
    }
}
