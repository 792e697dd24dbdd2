import Foundation
import Ledger
import Testing

/// Error codes live in one place, `ErrorCode`: the sources build errors from
/// its constants, never from a string of their own.
@Suite struct ErrorCodeTests {
    @Test func theSourcesUseTheNamedCodes() throws {
        var literal: [String] = []
        for path in Repository.files(under: "Sources", endingIn: ".swift") where !path.hasSuffix("/ErrorCode.swift") {
            for (number, line) in try Repository.read(path).split(separator: "\n", omittingEmptySubsequences: false).enumerated()
            where line.contains("code: \"") || line.contains("code == \"") {
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
        #expect(ErrorCode.http(418).rawValue == "http_418")
    }
}
