import Foundation
import HTTPAPI
import Hummingbird
import HummingbirdTesting
import Postgres
import SubledgerApp
import SubledgerAppTesting
@testable import SubledgerBench
import Testing

/// The bench's floor routes (`addFloorRoutes`) make the ceiling's own
/// statements, behind the API's key check, and exist only where mounted.
@Suite struct FloorRouteTests {
    @Test func floorRoutesRunTheCeilingsStatementsBehindAWriteKey() async throws {
        let dependencies = try await makeDependencies()
        try await dependencies.pool.query("CREATE TABLE bench_baseline (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, data jsonb NOT NULL)")
        let router = buildRouter(AppComponents(dependencies))
        addFloorRoutes(to: router, pool: dependencies.pool, keys: dependencies.configuration.apiKeys)
        let app = buildApplication(router: router, dependencies: dependencies)
        do {
            try await app.test(.router) { client in
                #expect(try await client.post("/floor/insert", #"{"a": 1}"#, key: nil).status == .unauthorized)
                #expect(try await client.post("/floor/insert", #"{"a": 1}"#, key: Keys.support).status == .forbidden)
                #expect(try await client.post("/floor/insert", #"{"a": 1}"#).status == .created)
                #expect(try await client.post("/floor/insert", #"{"b": [2, 3]}"#).status == .created)

                let first = try await client.get("/floor/select/1")
                #expect(first.status == .ok)
                #expect(first.json == .object(["a": .integer(1)]))
                #expect(try await client.get("/floor/select/2").json == .object(["b": .array([.integer(2), .integer(3)])]))
                #expect(try await client.get("/floor/select/3").status == .notFound)
                #expect(try await client.get("/floor/select/1", key: nil).status == .unauthorized)
                let stored = try await dependencies.pool.query("SELECT count(*) FROM bench_baseline").first!.decode(Int.self, at: 0)
                #expect(stored == 2)
            }
        } catch {
            await dependencies.pool.close()
            throw error
        }
        await dependencies.pool.close()
    }

    @Test func theServiceDoesNotMountThem() async throws {
        try await withApp { client, _ in
            let insert = try await client.post("/floor/insert", #"{"a": 1}"#)
            let select = try await client.get("/floor/select/1")
            #expect(insert.status == .notFound)
            #expect(select.status == .notFound)
        }
    }
}
