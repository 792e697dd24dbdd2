// Test support shared by the AppStore and Server tests: Apple-shaped
// certificate chains and signed App Store data. Not used by the product.
import AppStore
import Crypto
import Foundation
import X509

/// A stand-in for Apple's signing: a root CA → intermediate CA (with Apple's
/// WWDR marker) → leaf (with the receipt-signer marker) on P-256 keys, and
/// ES256 compact JWS signed with the leaf, shaped like App Store data.
public struct TestAppStore: Sendable {
    public struct Authority: @unchecked Sendable {
        public var key: P256.Signing.PrivateKey
        public var certificate: Certificate
    }

    /// How to shape the chain; each field bends one thing a test rejects.
    public struct Options {
        public var rootName = "Test Apple Root CA - G3"
        public var leafHasMarker = true
        public var intermediateHasMarker = true
        public var leafValidity = TestAppStore.date("2020-01-01T00:00:00Z")...TestAppStore.date("2040-01-01T00:00:00Z")
        /// Sign the leaf with the root directly (x5c still carries the intermediate).
        public var leafIssuedByRoot = false

        public init(rootName: String = "Test Apple Root CA - G3", leafHasMarker: Bool = true, intermediateHasMarker: Bool = true,
                    leafValidity: ClosedRange<Date>? = nil, leafIssuedByRoot: Bool = false) {
            self.rootName = rootName
            self.leafHasMarker = leafHasMarker
            self.intermediateHasMarker = intermediateHasMarker
            if let leafValidity { self.leafValidity = leafValidity }
            self.leafIssuedByRoot = leafIssuedByRoot
        }
    }

    public static let bundleID = "com.example.subledger"

    public let root: Authority
    public let intermediate: Authority
    public let leaf: Authority

    public init(_ options: Options = Options()) throws {
        let longAgo = Self.date("2015-01-01T00:00:00Z"), farAhead = Self.date("2045-01-01T00:00:00Z")
        let rootKey = P256.Signing.PrivateKey()
        let rootName = try DistinguishedName { CommonName(options.rootName); OrganizationName("Apple Inc.") }
        root = Authority(key: rootKey, certificate: try Self.makeCertificate(
            subject: rootName, publicKey: rootKey.publicKey, issuer: rootName, issuerKey: rootKey,
            validity: longAgo...farAhead, isAuthority: true, marker: nil))

        let intermediateKey = P256.Signing.PrivateKey()
        let intermediateName = try DistinguishedName { CommonName("Test Apple Worldwide Developer Relations CA - G6") }
        intermediate = Authority(key: intermediateKey, certificate: try Self.makeCertificate(
            subject: intermediateName, publicKey: intermediateKey.publicKey, issuer: rootName, issuerKey: rootKey,
            validity: longAgo...farAhead, isAuthority: true,
            marker: options.intermediateHasMarker ? Self.intermediateMarker : nil))

        let leafKey = P256.Signing.PrivateKey()
        let leafName = try DistinguishedName { CommonName("Test Prod ECC Mac App Store and iTunes Store Receipt Signing") }
        leaf = Authority(key: leafKey, certificate: try Self.makeCertificate(
            subject: leafName, publicKey: leafKey.publicKey,
            issuer: options.leafIssuedByRoot ? rootName : intermediateName,
            issuerKey: options.leafIssuedByRoot ? rootKey : intermediateKey,
            validity: options.leafValidity, isAuthority: false,
            marker: options.leafHasMarker ? Self.leafMarker : nil))
    }

    // Apple's marker extensions hold an ASN.1 NULL.
    public static let intermediateMarker = Certificate.Extension(oid: [1, 2, 840, 113635, 100, 6, 2, 1], critical: false, value: [0x05, 0x00])
    public static let leafMarker = Certificate.Extension(oid: [1, 2, 840, 113635, 100, 6, 11, 1], critical: false, value: [0x05, 0x00])

    public static func makeCertificate(subject: DistinguishedName, publicKey: P256.Signing.PublicKey, issuer: DistinguishedName,
                                issuerKey: P256.Signing.PrivateKey, validity: ClosedRange<Date>, isAuthority: Bool,
                                marker: Certificate.Extension?) throws -> Certificate {
        let extensions = try Certificate.Extensions {
            Critical(isAuthority ? BasicConstraints.isCertificateAuthority(maxPathLength: nil) : .notCertificateAuthority)
            if isAuthority {
                KeyUsage(keyCertSign: true, cRLSign: true)
            } else {
                KeyUsage(digitalSignature: true)
            }
            if let marker { marker }
        }
        return try Certificate(
            version: .v3, serialNumber: Certificate.SerialNumber(), publicKey: .init(publicKey),
            notValidBefore: validity.lowerBound, notValidAfter: validity.upperBound,
            issuer: issuer, subject: subject, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: extensions, issuerPrivateKey: .init(issuerKey))
    }

    public var verifier: AppStoreVerifier { AppStoreVerifier(rootCertificates: [root.certificate], bundleID: Self.bundleID) }

    /// x5c as Apple sends it: standard base64 DER, leaf first.
    public var x5c: [String] {
        get throws { try [leaf, intermediate, root].map { try Self.der($0.certificate).base64EncodedString() } }
    }

    public static func der(_ certificate: Certificate) throws -> Data {
        Data(try certificate.serializeAsPEM().derBytes)
    }

    // MARK: - Signing

    /// Signs raw payload bytes; `header` overrides the standard ES256 header.
    public func sign(payload: Data, header: [String: Any]? = nil) throws -> String {
        let header = try header ?? ["alg": "ES256", "x5c": x5c]
        let headerPart = Self.base64URL(try JSONSerialization.data(withJSONObject: header, options: [.sortedKeys]))
        let signingInput = headerPart + "." + Self.base64URL(payload)
        let signature = try leaf.key.signature(for: Data(signingInput.utf8))
        return signingInput + "." + Self.base64URL(signature.rawRepresentation)
    }

    public func sign(_ value: some Encodable) throws -> String {
        try sign(payload: Self.encoder.encode(value))
    }

    /// A notification's `signedPayload`, with the transaction and renewal
    /// info signed inside it.
    public func signedNotification(_ type: NotificationType, _ subtype: NotificationSubtype? = nil,
                            transaction: TransactionInfo? = nil, renewal: RenewalInfo? = nil,
                            bundleID: String = TestAppStore.bundleID, environment: AppStoreEnvironment = .sandbox,
                            signedDate: Date = TestAppStore.signedDate, uuid: String = UUID().uuidString.lowercased()) throws -> String {
        let data = NotificationData(bundleID: bundleID, bundleVersion: "1", environment: environment, appAppleID: 1234,
                                    signedTransactionInfo: try transaction.map { try sign($0) },
                                    signedRenewalInfo: try renewal.map { try sign($0) },
                                    status: 1)
        let payload = NotificationPayload(notificationType: type, subtype: subtype, notificationUUID: uuid,
                                          signedDate: signedDate, data: data)
        return try sign(payload)
    }

    public func body(signedPayload: String) throws -> Data {
        try JSONSerialization.data(withJSONObject: ["signedPayload": signedPayload])
    }

    // MARK: - Payloads

    public static let signedDate = date("2025-03-01T12:00:00Z")
    public static let subscriberID = "6F1C3B8E-2A44-4C1B-9E0D-5B7A1C2D3E4F"

    public static func subscription(transactionID: String = "2000000000000002", originalTransactionID: String = "2000000000000001",
                             productID: String = "com.example.pro.monthly",
                             purchaseDate: Date = date("2025-03-01T11:59:00Z"),
                             expiresDate: Date = date("2025-04-01T11:59:00Z"),
                             revocationDate: Date? = nil, revocationReason: Int? = nil,
                             bundleID: String = TestAppStore.bundleID) -> TransactionInfo {
        TransactionInfo(transactionID: transactionID, originalTransactionID: originalTransactionID, bundleID: bundleID,
                        productID: productID, purchaseDate: purchaseDate, originalPurchaseDate: date("2025-01-01T11:59:00Z"),
                        expiresDate: expiresDate, quantity: 1, type: .autoRenewable, appAccountToken: subscriberID,
                        signedDate: signedDate, revocationReason: revocationReason, revocationDate: revocationDate,
                        environment: .sandbox)
    }

    public static func renewalInfo(autoRenew: Bool = true, gracePeriodExpiresDate: Date? = nil,
                            originalTransactionID: String = "2000000000000001") -> RenewalInfo {
        RenewalInfo(originalTransactionID: originalTransactionID, productID: "com.example.pro.monthly",
                    autoRenewProductID: "com.example.pro.monthly", autoRenewStatus: autoRenew ? 1 : 0,
                    gracePeriodExpiresDate: gracePeriodExpiresDate, isInBillingRetryPeriod: gracePeriodExpiresDate != nil,
                    renewalDate: date("2025-04-01T11:59:00Z"), signedDate: signedDate, environment: .sandbox)
    }

    // MARK: - Encoding

    public static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .millisecondsSince1970
        encoder.outputFormatting = .sortedKeys
        return encoder
    }()

    public static func base64URL(_ data: Data) -> String {
        data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    public static func decodeBase64URL(_ text: Substring) -> Data {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.count % 4 != 0 { base64 += "=" }
        return Data(base64Encoded: base64)!
    }

    public static func date(_ text: String) -> Date {
        ISO8601DateFormatter().date(from: text)!
    }
}
