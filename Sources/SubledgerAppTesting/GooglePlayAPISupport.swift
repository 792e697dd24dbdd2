import Foundation
import GooglePlay
import GooglePlayTesting
import HummingbirdTesting
import JSON
import Logging
import SubledgerApp

/// What a Google Play API test works with: the fake Google, a client of it
/// built with the service account's key file, and that key.
public struct GooglePlayAPITest: Sendable {
    public let fake: FakeGoogle
    public let client: GooglePlayAPIClient
    public let key: ServiceAccountKey
    /// Raw requests to the fake.
    public let http: any TestClientProtocol

    /// A client of the same fake with other settings, key or URL.
    public func client(settings: GooglePlayAPISettings = GooglePlayAPITest.settings, key: ServiceAccountKey? = nil,
                       apiURL: String? = nil) async -> GooglePlayAPIClient {
        let baseURL = await fake.baseURL
        return GooglePlayAPIClient(serviceAccount: key ?? self.key, packageName: GooglePlaySamples.packageName,
                                   apiURL: apiURL ?? baseURL, settings: settings, logger: GooglePlayAPITest.logger)
    }

    /// One account (an RSA key takes a moment to make) for every test, and a
    /// stranger: the same email and key id, another key, as after a key was
    /// deleted and a new one made.
    public static let account = try! FakeServiceAccount()
    public static let stranger = try! FakeServiceAccount(clientEmail: account.clientEmail, privateKeyID: account.privateKeyID)

    /// How the configuration would name what to check (the variables are
    /// declared by the configuration, which sets this hint).
    public static let credentialsHint = "SUBLEDGER_GOOGLEPLAY_SERVICE_ACCOUNT_FILE and SUBLEDGER_GOOGLEPLAY_PACKAGE_NAME"

    public static let logger = Logger(label: "googleplay-api-tests")

    /// Short retries and no pacing to speak of, so tests run fast.
    public static var settings: GooglePlayAPISettings {
        var settings = GooglePlayAPISettings()
        settings.retryDelays = [.milliseconds(1), .milliseconds(2), .milliseconds(4)]
        settings.requestTimeout = .seconds(5)
        settings.maximumRateLimitWait = .seconds(5)
        settings.requestsPerSecond = 10_000
        settings.voidedPurchasesRequestsPerSecond = 10_000
        settings.credentialsHint = credentialsHint
        return settings
    }
}

/// Runs `body` with a fake Google on loopback and a client of it.
public func withGooglePlayAPI(settings: GooglePlayAPISettings = GooglePlayAPITest.settings,
                              _ body: @escaping @Sendable (GooglePlayAPITest) async throws -> Void) async throws {
    let fake = FakeGoogle(serviceAccount: GooglePlayAPITest.account)
    try await fake.serve { fake, http in
        let key = try ServiceAccountKey(json: GooglePlayAPITest.account.json(tokenURI: await fake.tokenURI))
        let client = GooglePlayAPIClient(serviceAccount: key, packageName: GooglePlaySamples.packageName, apiURL: await fake.baseURL,
                                         settings: settings, logger: GooglePlayAPITest.logger)
        try await body(GooglePlayAPITest(fake: fake, client: client, key: key, http: http))
    }
}

/// The error a call threw, or nil when it succeeded.
public func googlePlayFailure(_ call: () async throws(GooglePlayAPIError) -> Void) async -> GooglePlayAPIError? {
    do {
        try await call()
        return nil
    } catch {
        return error
    }
}

/// Sample purchase tokens with the characters a path must encode.
public enum PlayTokens {
    /// Slash, plus and equals, as base64 would have them.
    public static let awkward = "AO-J1Oz/abc+def=ghi==" + GooglePlaySamples.purchaseToken(7)
    public static let encodedAwkward = "AO-J1Oz%2Fabc%2Bdef%3Dghi%3D%3D" + GooglePlaySamples.purchaseToken(7)
}
