import Foundation
import Hummingbird
import SubledgerApp

/// `GET /console` and `GET /console/{asset}`: the support console, static
/// files shipped as package resources (`Resources/console`). No key: the page
/// asks for one and its API calls send it. Every answer carries a strict
/// Content-Security-Policy (no inline script or style), so ledger data the
/// page shows can never run as code even if it were ever put into markup.
struct ConsoleController {
    let assets: ConsoleAssets

    init(assets: ConsoleAssets = .bundled) {
        self.assets = assets
    }

    func addRoutes(to router: Router<AppRequestContext>) {
        router.get("console") { request, _ in try assets.response(for: ConsoleAssets.indexName, request: request) }
        router.get("console/:asset") { request, context in
            try assets.response(for: context.parameters.get("asset") ?? "", request: request)
        }
    }
}

private typealias FieldName = HTTPFields.Element.Name

/// The console's files, read once at start.
package struct ConsoleAssets: Sendable {
    struct Asset: Sendable {
        var body: Data
        var contentType: String
        var etag: String
    }

    static let indexName = "index.html"

    /// Headers of every console answer.
    static let securityHeaders: HTTPFields = [
        FieldName("Content-Security-Policy")!:
            "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'",
        FieldName("X-Content-Type-Options")!: "nosniff",
        FieldName("Referrer-Policy")!: "no-referrer",
        .cacheControl: "no-cache",
    ]

    let files: [String: Asset]

    /// The folder `Resources/console` of the HTTPAPI bundle, flat: every
    /// file is served under its name, nothing else is.
    package static let bundled: ConsoleAssets = {
        guard let folder = Bundle.module.url(forResource: "console", withExtension: nil),
              let names = try? FileManager.default.contentsOfDirectory(atPath: folder.path)
        else { fatalError("the console resource folder is missing from the HTTPAPI bundle") }
        var files = [String: Data]()
        for name in names where !name.hasPrefix(".") {
            if let data = try? Data(contentsOf: folder.appendingPathComponent(name)) { files[name] = data }
        }
        return ConsoleAssets(files: files)
    }()

    init(files: [String: Data]) {
        self.files = files.reduce(into: [:]) { result, file in
            result[file.key] = Asset(
                body: file.value, contentType: Self.contentType(of: file.key),
                etag: "\"" + String(file.value.count, radix: 16) + "-" + String(fnv1a64(file.value), radix: 16) + "\"")
        }
    }

    package var names: [String] { files.keys.sorted() }

    package func body(of name: String) -> Data? { files[name]?.body }

    static func contentType(of name: String) -> String {
        switch name.split(separator: ".").last.map(String.init) ?? "" {
        case "html": "text/html; charset=utf-8"
        case "css": "text/css; charset=utf-8"
        case "js": "text/javascript; charset=utf-8"
        case "svg": "image/svg+xml"
        case "png": "image/png"
        case "json": "application/json"
        default: "application/octet-stream"
        }
    }

    func response(for name: String, request: Request) throws -> Response {
        guard let asset = files[name] else {
            throw APIError(.notFound, code: .notFound, message: "the console has no file named \(name.prefix(100))")
        }
        var headers = Self.securityHeaders
        headers[.eTag] = asset.etag
        if request.headers[values: .ifNoneMatch].flatMap({ $0.split(separator: ",") })
            .contains(where: { $0.trimmingCharacters(in: .whitespaces) == asset.etag })
        {
            return Response(status: .notModified, headers: headers)
        }
        headers[.contentType] = asset.contentType
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(data: asset.body)))
    }
}
