import Foundation
import HTTPAPI
import Hummingbird
import HummingbirdTesting
import SubledgerAppTesting
import Testing

@Suite("GET /console")
struct ConsoleRouteTests {
    static let policy =
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'"
    static let csp = HTTPFields.Element.Name("Content-Security-Policy")!
    static let noSniff = HTTPFields.Element.Name("X-Content-Type-Options")!
    static let referrer = HTTPFields.Element.Name("Referrer-Policy")!

    @Test func thePageAndItsFilesAreServedWithAStrictPolicyAndNoKey() async throws {
        try await withApp { client, _ in
            let page = try await client.get("/console", key: nil)
            #expect(page.status == .ok)
            #expect(page.headers[.contentType] == "text/html; charset=utf-8")
            #expect(page.headers[Self.csp] == Self.policy)
            #expect(page.headers[Self.noSniff] == "nosniff")
            #expect(page.headers[Self.referrer] == "no-referrer")
            #expect(page.text.contains(#"<script type="module" src="/console/app.js"></script>"#))
            #expect(try await client.get("/console/", key: nil).text == page.text)

            for (name, type) in [("app.js", "text/javascript; charset=utf-8"), ("console.css", "text/css; charset=utf-8"),
                                 ("index.html", "text/html; charset=utf-8")] {
                let file = try await client.get("/console/\(name)", key: nil)
                #expect(file.status == .ok, "\(name)")
                #expect(file.headers[.contentType] == type, "\(name)")
                #expect(file.headers[Self.csp] == Self.policy, "\(name)")
                #expect(file.headers[Self.noSniff] == "nosniff", "\(name)")
            }
            for name in ConsoleAssets.bundled.names {
                #expect(try await client.get("/console/\(name)", key: nil).status == .ok, "\(name)")
            }

            let etag = try #require(page.headers[.eTag])
            let cached = try await client.get("/console", key: nil, headers: [.ifNoneMatch: etag])
            #expect(cached.status == .notModified)
            #expect(cached.body.readableBytes == 0)

            for missing in ["nope.js", "..%2Fopenapi.yaml", "%2E%2E", ".hidden"] {
                let response = try await client.get("/console/\(missing)", key: nil)
                #expect(response.status == .notFound, "\(missing)")
                #expect(response.error.code == "not_found", "\(missing)")
            }
        }
    }

    /// What the browser suite checks in one browser, checked here on the
    /// shipped files: nothing in them parses text as HTML or runs inline code,
    /// and every file they reference is shipped.
    @Test func theShippedFilesNeverTurnDataIntoMarkup() throws {
        let assets = ConsoleAssets.bundled
        let names = Set(assets.names)
        #expect(names.isSuperset(of: ["index.html", "app.js", "console.css"]))
        for name in names where name.hasSuffix(".js") {
            let text = String(decoding: try #require(assets.body(of: name)), as: UTF8.self)
            for forbidden in ["innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function",
                              "setAttribute('style'", ".cssText", "DOMParser", "createContextualFragment"] {
                #expect(!text.contains(forbidden), "\(name) uses \(forbidden)")
            }
            for imported in matches(of: #"from '\./([A-Za-z0-9_-]+\.js)'"#, in: text) {
                #expect(names.contains(imported), "\(name) imports \(imported), which is not shipped")
            }
        }
        let page = String(decoding: try #require(assets.body(of: "index.html")), as: UTF8.self)
        #expect(!page.contains("<style"))
        #expect(!page.contains(" style="))
        #expect(matches(of: #"\son[a-z]+="#, in: page).isEmpty, "inline event handlers")
        let scripts = matches(of: #"(<script[^>]*>)"#, in: page)
        #expect(!scripts.isEmpty)
        for script in scripts { #expect(script.contains(" src=\"/console/"), "inline script: \(script)") }
        for referenced in matches(of: #"(?:src|href)="/console/([^"]+)""#, in: page) {
            #expect(names.contains(referenced), "index.html references \(referenced), which is not shipped")
        }
    }

    func matches(of pattern: String, in text: String) -> [String] {
        let expression = try! NSRegularExpression(pattern: pattern)
        return expression.matches(in: text, range: NSRange(text.startIndex..., in: text)).compactMap { match in
            let range = match.numberOfRanges > 1 ? match.range(at: 1) : match.range
            return Range(range, in: text).map { String(text[$0]) }
        }
    }
}
