import Foundation
import Ledger
import Testing

/// Error codes live in one place, `ErrorCode`: the sources build errors from
/// its constants, never from a string of their own.
@Suite struct ErrorCodeTests {
    @Test func theSourcesUseTheNamedCodes() throws {
        var literal: [String] = []
        // A code in a JSON literal too (`{"error":{"code":"request_timeout"`), as the 408 body once was.
        let jsonCode = try NSRegularExpression(pattern: #""code"\s*:\s*"[a-z_]"#)
        for path in Repository.files(under: "Sources", endingIn: ".swift") where !path.hasSuffix("/ErrorCode.swift") {
            for (number, line) in try Repository.read(path).split(separator: "\n", omittingEmptySubsequences: false).enumerated()
            where line.contains("code: \"") || line.contains("code == \"")
                || jsonCode.firstMatch(in: String(line), range: NSRange(line.startIndex..., in: line)) != nil {
                literal.append("\(path):\(number + 1)")
            }
        }
        #expect(literal == [], "error codes written as strings instead of ErrorCode constants")
    }

    @Test func theWireStringsAreTheDocumentedOnes() {
        #expect(ErrorCode.invalidField.rawValue == "invalid_field")
        #expect(ErrorCode.bodyTooLarge.rawValue == "body_too_large")
        #expect(ErrorCode.ownedByOtherSubscriber.rawValue == "owned_by_other_subscriber")
        #expect(ErrorCode.appStoreAPIRateLimited.rawValue == "appstore_api_rate_limited")
    }
}

/// docs/api.md lists exactly the codes `ErrorCode` declares.
@Suite struct ErrorCodeDocumentationTests {
    @Test func theContractListsEveryCode() throws {
        // The ledger's codes, and the few only the HTTP edge answers.
        let source = try Repository.read("Sources/Ledger/ErrorCode.swift") + Repository.read("Sources/HTTPAPI/Support/ErrorCode.swift")
        let declared = Set(try NSRegularExpression(pattern: #"ErrorCode\(rawValue: "([a-z_]+)"\)"#)
            .matches(in: source, range: NSRange(source.startIndex..., in: source))
            .map { String(source[Range($0.range(at: 1), in: source)!]) })
        let page = try Repository.read("docs/api.md")
        let section = page.components(separatedBy: "## Error codes").dropFirst().first?.components(separatedBy: "\n## ").first ?? ""
        let listed = Set(try NSRegularExpression(pattern: #"^\| `([a-z_]+)` \|"#, options: .anchorsMatchLines)
            .matches(in: section, range: NSRange(section.startIndex..., in: section))
            .map { String(section[Range($0.range(at: 1), in: section)!]) })
        #expect(declared.count > 40)
        #expect(declared.subtracting(listed).sorted() == [], "declared in ErrorCode but missing from docs/api.md")
        #expect(listed.subtracting(declared).sorted() == [], "listed in docs/api.md but not declared in ErrorCode")
    }
}
