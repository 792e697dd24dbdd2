import Foundation
import HTTPAPI
import Hummingbird
import HummingbirdTesting
import SubledgerApp
import SubledgerAppTesting
import Testing

/// The operations of the OpenAPI document, read from its YAML by indentation
/// (the document keeps one shape: paths at two spaces, methods at four,
/// response codes quoted at eight).
struct DocumentedOperations {
    /// "METHOD /path" → documented response statuses.
    var statuses: [String: Set<Int>] = [:]

    init(yaml: String) {
        let lines = yaml.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        var inPaths = false
        var path: String?
        var operation: String?
        var aliases: [(path: String, target: String)] = []
        for line in lines {
            if line == "paths:" { inPaths = true; continue }
            guard inPaths else { continue }
            if !line.hasPrefix(" "), !line.isEmpty { break }
            if line.hasPrefix("  /"), line.hasSuffix(":") {
                path = String(line.dropFirst(2).dropLast())
                operation = nil
            } else if let current = path, line.hasPrefix("    $ref: ") {
                // `#/paths/~1v1~1products` names another path item.
                let reference = line.dropFirst("    $ref: ".count).trimmingCharacters(in: CharacterSet(charactersIn: "\""))
                let target = String(reference.dropFirst("#/paths/".count)).replacingOccurrences(of: "~1", with: "/")
                aliases.append((current, target))
            } else if let current = path, line.hasPrefix("    "), !line.hasPrefix("     "), line.hasSuffix(":") {
                let method = line.trimmingCharacters(in: .whitespaces).dropLast()
                if ["get", "post", "put", "patch", "delete"].contains(method) {
                    operation = "\(method.uppercased()) \(current)"
                    statuses[operation!] = []
                } else {
                    operation = nil
                }
            } else if let operation, line.hasPrefix("        \""), !line.hasPrefix("         ") {
                let code = line.dropFirst(9).prefix(3)
                if let status = Int(code) { statuses[operation, default: []].insert(status) }
            }
        }
        for alias in aliases {
            for (key, codes) in statuses where key.hasSuffix(" " + alias.target) {
                let method = key.split(separator: " ")[0]
                statuses["\(method) \(alias.path)"] = codes
            }
        }
    }
}

@Suite struct OpenAPIRouteTests {
    static let document = DocumentedOperations(yaml: String(decoding: OpenAPIDocument.yaml, as: UTF8.self))

    /// "METHOD /path" of every route the router serves, paths as OpenAPI writes them.
    static func routedOperations(_ dependencies: AppDependencies) -> Set<String> {
        Set(buildRouter(AppComponents(dependencies)).routes.map { "\($0.method) \($0.path)" })
    }

    @Test func theDocumentIsReadAsOperations() {
        #expect(Self.document.statuses["POST /v1/subscribers/{subscriberId}/events"]?.contains(201) == true)
        #expect(Self.document.statuses["GET /v1/products_v1.json"]?.contains(304) == true)
        #expect(Self.document.statuses.count >= 15)
    }

    @Test func everyRouteIsDocumentedAndEveryDocumentedOperationIsRouted() async throws {
        let dependencies = try await makeDependencies()
        defer { Task { await dependencies.pool.close() } }
        let routed = Self.routedOperations(dependencies)
        let documented = Set(Self.document.statuses.keys)
        #expect(routed.subtracting(documented).isEmpty, "routes missing from openapi.yaml: \(routed.subtracting(documented).sorted())")
        #expect(documented.subtracting(routed).isEmpty, "documented but not routed: \(documented.subtracting(routed).sorted())")
    }

    /// Every status a route answers to a missing key, a key of the wrong role
    /// and an empty body is one its operation documents.
    @Test func everyStatusAProbeSeesIsDocumented() async throws {
        try await withApp { client, dependencies in
            for operation in Self.routedOperations(dependencies).sorted() {
                let parts = operation.split(separator: " ")
                let method = HTTPRequest.Method(rawValue: String(parts[0]))!
                let uri = String(parts[1]).replacingOccurrences(of: #"\{[^}]+\}"#, with: "probe", options: .regularExpression)
                let documented = Self.document.statuses[operation] ?? []
                for key in [nil, Keys.support, Keys.ingest] {
                    var headers: HTTPFields = key.map(Keys.bearer) ?? [:]
                    headers[.contentType] = "application/json"
                    let body = method == .post ? ByteBuffer(string: "{}") : nil
                    let response = try await client.execute(uri: uri, method: method, headers: headers, body: body)
                    #expect(documented.contains(Int(response.status.code)),
                            "\(operation) answered \(response.status.code) (key \(key ?? "none")), which openapi.yaml does not list")
                }
            }
        }
    }
}
