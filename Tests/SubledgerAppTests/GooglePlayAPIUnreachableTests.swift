import Foundation
import GooglePlay
import GooglePlayTesting
import SubledgerApp
import SubledgerAppTesting
import Testing

/// An API that cannot be reached, with a short request timeout: the token
/// exchange (an RSA signature and a request to the fake Google) must finish
/// within the same timeout, so this runs with the timed suites, alone
/// (scripts/test): beside sixty others on two cores, the exchange once
/// outlasted it and the failure was the token's, not the API's.
@Suite struct GooglePlayAPIUnreachableTests {
    @Test func anUnreachableAPIIsUnavailableAfterTheRetries() async throws {
        try await withGooglePlayAPI { api in
            // Nothing listens on port 9 of loopback; the token endpoint still answers. The HTTP client retries a
            // refused connection until the request's timeout, so each attempt lasts that long.
            var settings = GooglePlayAPITest.settings
            settings.requestTimeout = .milliseconds(300)
            let client = await api.client(settings: settings, apiURL: "http://127.0.0.1:9")
            let error = await googlePlayFailure { () async throws(GooglePlayAPIError) in
                try await GooglePlayAPIClientTests.fetch(client)
            }
            #expect(error?.kind == .unavailable)
            #expect(error?.message.contains("after 4 attempts") == true, "\(error?.message ?? "no error")")
            #expect(error?.description.contains(GooglePlayAPIClientTests.token) == false)
        }
    }
}
