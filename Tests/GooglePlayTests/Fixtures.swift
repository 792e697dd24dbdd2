import Foundation
import GooglePlay
import GooglePlayTesting
import JSON

/// RSA-2048 keys take a while to make in a debug build: every suite shares these.
enum Fixtures {
    /// Google's push-token keys: 1 and 2 are published, 3 never is.
    static let identity = try! FakeGoogleIdentity(keyIDs: ["google-key-1", "google-key-2", "google-key-3"])
    static let serviceAccount = try! FakeServiceAccount()
    static let otherServiceAccount = try! FakeServiceAccount(clientEmail: "intruder@other-project.iam.gserviceaccount.com",
                                                             privateKeyID: "fedcba9876543210fedcba9876543210fedcba98")

    static let now = RFC3339.parse("2024-03-01T12:00:00Z")!
    static let observedAt = RFC3339.parse("2024-03-01T12:00:10Z")!

    static var publishedKeys: GoogleJWKS {
        try! GoogleJWKS(json: identity.jwks(keyIDs: ["google-key-1", "google-key-2"]))
    }
}

extension JSONValue {
    /// The object with `key` set (or removed, for nil).
    func setting(_ key: String, _ value: JSONValue?) -> JSONValue {
        guard case .object(var fields) = self else { return self }
        fields[key] = value
        return .object(fields)
    }

    var data: Data { GooglePlaySamples.data(self) }
}
