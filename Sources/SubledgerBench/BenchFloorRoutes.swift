import HTTPAPI
import Hummingbird
import Postgres
import SubledgerApp

/// Routes that `subledger bench` mounts beside the API (never `serve`) to
/// measure the floor under the request path: a request that makes exactly
/// the statement of PostgreSQL's own ceiling, through the same HTTP stack,
/// key check and connection pool as the API's routes, and nothing else. The
/// ratio of such a request to its ceiling is the most any route making one
/// such statement per request can reach on the machine.
///
/// - `GET /floor/select/{id}`: `SELECT data FROM bench_baseline WHERE id = $1`
///   (the point-`SELECT` ceiling's statement), the row's `data` as the body.
/// - `POST /floor/insert`: `INSERT INTO bench_baseline (data) VALUES ($1)`
///   (the durable-`INSERT` ceiling's statement) with the request's body, 201.
///
/// The table is the bench's own (`bench_baseline`); both take a key that
/// may write.
func addFloorRoutes(to router: Router<AppRequestContext>, pool: ConnectionPool, keys: APIKeys) {
    let routes = router.group("floor").add(middleware: AuthMiddleware(keys: keys, access: .write))
    routes.get("select/:id") { _, context -> Response in
        let id = try context.parameters.require("id", as: Int64.self)
        let rows = try await pool.query("SELECT data::text FROM bench_baseline WHERE id = \(id)")
        guard let row = rows.first else { throw APIError(.notFound, code: .notFound, message: "no row \(id)") }
        return .json(bytes: Array(try row.decode(String.self, at: 0).utf8))
    }
    routes.post("insert") { request, _ -> Response in
        let body = try await request.body.collect(upTo: 1 << 16)
        try await pool.query("INSERT INTO bench_baseline (data) VALUES (\(PostgresJSON(text: String(buffer: body)))::jsonb)")
        return Response(status: .created)
    }
}
