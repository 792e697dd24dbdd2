import Ledger
import Crypto
import Foundation
@_spi(FixedExpiryValidationTime) import X509

/// Verifies App Store signed data (notifications, transactions, renewal info)
/// the way Apple's App Store Server Library `SignedDataVerifier` does offline:
/// an ES256 JWS whose `x5c` chain (leaf → intermediate → root) ends in a
/// configured Apple root, carries Apple's marker extensions, and was valid
/// when Apple signed the payload (`signedDate`, not now: a notification
/// retried after the leaf expired is still Apple's).
public struct AppStoreVerifier: Sendable {
    /// The roots a chain must end in (`SUBLEDGER_APPSTORE_ROOT_CERTS`).
    public let rootCertificates: [Certificate]
    /// The app notifications must be for (`SUBLEDGER_APPSTORE_BUNDLE_ID`).
    public let bundleID: String
    /// The app's Apple ID (`SUBLEDGER_APPSTORE_APP_APPLE_ID`); when set, a
    /// notification naming another `appAppleId` is refused.
    public var appAppleID: Int64?
    /// The ledger environments accepted (`SUBLEDGER_APPSTORE_ENVIRONMENTS`);
    /// Xcode and local testing count as Sandbox.
    public var environments: Set<Ledger.Environment> = [.production, .sandbox]
    /// Chains validated before; shared by the copies of this verifier.
    public var verifiedChains = VerifiedChainCache()

    /// Marks the leaf as Apple's App Store receipt signer.
    static let leafMarkerOID = "1.2.840.113635.100.6.11.1"
    /// Marks the intermediate as Apple's WWDR certification authority.
    static let intermediateMarkerOID = "1.2.840.113635.100.6.2.1"

    public init(rootCertificates: [Certificate], bundleID: String) {
        self.rootCertificates = rootCertificates
        self.bundleID = bundleID
    }

    /// Loads the roots from `SUBLEDGER_APPSTORE_ROOT_CERTS` and builds a verifier.
    public init(rootCertificatePaths: String, bundleID: String) throws(AppStoreConfigurationError) {
        self.init(rootCertificates: try Self.loadRootCertificates(paths: rootCertificatePaths), bundleID: bundleID)
    }

    // MARK: - Notifications

    /// Verifies the body of `POST /v1/appstore/notifications`
    /// (`{"signedPayload": JWS}`), its nested transaction and renewal info,
    /// and that it is for this app.
    public func verifyNotification(body: Data) async throws(AppStoreVerificationError) -> VerifiedNotification {
        struct Body: Decodable { var signedPayload: String }
        let decoded: Body
        do {
            decoded = try JSONDecoder().decode(Body.self, from: body)
        } catch {
            throw AppStoreVerificationError(.invalidBody, "The body must be a JSON object {\"signedPayload\": \"<JWS>\"}.")
        }
        return try await verifyNotification(signedPayload: decoded.signedPayload)
    }

    /// Verifies a notification's `signedPayload` and everything signed inside it.
    public func verifyNotification(signedPayload: String) async throws(AppStoreVerificationError) -> VerifiedNotification {
        let payload = try await verifiedPayload(signedPayload, as: NotificationPayload.self, field: "signedPayload")
        // As Apple's SignedDataVerifier: the bundle id, the app's Apple ID and
        // the environment, read from whichever shape the notification has
        // (`data`, `summary`, `appData` or `externalPurchaseToken`).
        try checkBundleID(payload.bundleID, field: "signedPayload")
        if let expected = self.appAppleID, let appAppleID = payload.appAppleID, appAppleID != expected {
            throw AppStoreVerificationError(.appAppleIDMismatch,
                                            "Signed for app Apple ID \(appAppleID); this server accepts \(expected) (SUBLEDGER_APPSTORE_APP_APPLE_ID).")
        }
        let environment = payload.environment
        try checkEnvironment(environment, field: "signedPayload")
        var transaction: TransactionInfo?
        if let signed = payload.data?.signedTransactionInfo {
            transaction = try await verifyTransaction(signed, field: "data.signedTransactionInfo")
            try checkSameEnvironment(transaction?.environment, as: environment, field: "data.signedTransactionInfo")
        }
        var renewalInfo: RenewalInfo?
        if let signed = payload.data?.signedRenewalInfo {
            renewalInfo = try await verifyRenewalInfo(signed, field: "data.signedRenewalInfo")
            try checkSameEnvironment(renewalInfo?.environment, as: environment, field: "data.signedRenewalInfo")
        }
        return VerifiedNotification(payload: payload, transaction: transaction, renewalInfo: renewalInfo)
    }

    /// What a notification that failed verification claims to be, read
    /// without checking anything: to describe a refused one to support, never
    /// to act on. Nil when it is not a JWS of a notification.
    public static func unverifiedNotification(_ signedPayload: String) -> NotificationPayload? {
        guard let jws = try? CompactJWS(signedPayload, field: "signedPayload") else { return nil }
        return try? payloadDecoder.decode(NotificationPayload.self, from: jws.payload)
    }

    /// Verifies a `signedTransactionInfo` (also what StoreKit 2 hands the app)
    /// and that it is for this app.
    public func verifyTransaction(_ signedTransaction: String, field: String = "signedTransactionInfo")
        async throws(AppStoreVerificationError) -> TransactionInfo {
        let transaction = try await verifiedPayload(signedTransaction, as: TransactionInfo.self, field: field)
        try checkBundleID(transaction.bundleID, field: field)
        try checkEnvironment(transaction.environment, field: field)
        return transaction
    }

    /// Verifies a `signedRenewalInfo`. It names no bundle id: the
    /// notification carrying it does.
    public func verifyRenewalInfo(_ signedRenewalInfo: String, field: String = "signedRenewalInfo")
        async throws(AppStoreVerificationError) -> RenewalInfo {
        try await verifiedPayload(signedRenewalInfo, as: RenewalInfo.self, field: field)
    }

    /// The ledger environment of an App Store one: Xcode and local testing are Sandbox.
    public static func ledgerEnvironment(_ environment: AppStoreEnvironment?) -> Ledger.Environment? {
        environment.map { $0 == .production ? .production : .sandbox }
    }

    private func checkEnvironment(_ environment: AppStoreEnvironment?, field: String) throws(AppStoreVerificationError) {
        guard let ledger = Self.ledgerEnvironment(environment), !environments.contains(ledger) else { return }
        throw AppStoreVerificationError(.environmentNotAccepted,
                                        "Signed in the \(environment?.rawValue ?? "") environment, which SUBLEDGER_APPSTORE_ENVIRONMENTS does not accept.",
                                        field: field)
    }

    private func checkSameEnvironment(_ nested: AppStoreEnvironment?, as outer: AppStoreEnvironment?,
                                      field: String) throws(AppStoreVerificationError) {
        guard let nested, let outer, nested != outer else { return }
        throw AppStoreVerificationError(.environmentMismatch,
                                        "Signed in the \(nested.rawValue) environment inside a \(outer.rawValue) notification.", field: field)
    }

    private func checkBundleID(_ signedFor: String?, field: String) throws(AppStoreVerificationError) {
        guard signedFor == bundleID else {
            let named = signedFor.map { "bundle id '\($0.prefix(256))'" } ?? "no bundle id"
            throw AppStoreVerificationError(.bundleIDMismatch,
                                            "Signed for \(named); this server accepts '\(bundleID)' (SUBLEDGER_APPSTORE_BUNDLE_ID).",
                                            field: field)
        }
    }

    // MARK: - JWS

    /// Checks a JWS end to end and decodes its payload: header, chain at
    /// `signedDate`, signature, the payload's shape, then its input limits.
    func verifiedPayload<Payload: Decodable & LimitedPayload>(_ text: String, as type: Payload.Type, field: String)
        async throws(AppStoreVerificationError) -> Payload {
        let jws = try CompactJWS(text, field: field)
        guard let algorithm = jws.header.alg else {
            throw AppStoreVerificationError(.unsupportedAlgorithm, "The JWS header has no 'alg'; App Store data is signed with ES256.", field: field)
        }
        guard algorithm == "ES256" else {
            throw AppStoreVerificationError(.unsupportedAlgorithm,
                                            "The JWS header's 'alg' is \"\(algorithm.prefix(32))\"; only ES256 is accepted.", field: field)
        }
        guard let x5c = jws.header.x5c, x5c.count == 3 else {
            throw AppStoreVerificationError(.invalidCertificateChain,
                                            "The JWS header's 'x5c' must hold exactly 3 certificates (leaf, intermediate, root), got \(jws.header.x5c?.count ?? 0).",
                                            field: field)
        }
        // The chain is judged at signedDate, read before the signature is
        // checked; a forged date fails the signature check right after.
        let signedDate = (try? Self.payloadDecoder.decode(SignedDate.self, from: jws.payload))?.signedDate
        let chainKey = VerifiedChainCache.key(x5c)
        let key: P256.Signing.PublicKey
        if let signedDate, let known = verifiedChains.key(for: chainKey, at: signedDate) {
            key = known
        } else {
            key = try await verifiedLeafKey(x5c, at: signedDate, field: field)
        }
        guard let signature = try? P256.Signing.ECDSASignature(rawRepresentation: jws.signature),
              key.isValidSignature(signature, for: jws.signingInput)
        else {
            throw AppStoreVerificationError(.invalidSignature,
                                            "The ES256 signature does not verify with the leaf certificate's key (\(jws.signature.count)-byte signature).",
                                            field: field)
        }

        let payload: Payload
        do {
            payload = try Self.payloadDecoder.decode(Payload.self, from: jws.payload)
        } catch {
            throw AppStoreVerificationError(.invalidPayload, "The signed payload does not match Apple's format: \(Self.describe(error)).",
                                            field: field)
        }
        return try payload.withinLimits(field: field)
    }

    /// Parses and validates a chain not in the cache, and caches its leaf key.
    private func verifiedLeafKey(_ x5c: [String], at signedDate: Date?, field: String)
        async throws(AppStoreVerificationError) -> P256.Signing.PublicKey {
        var chain: [Certificate] = []
        for (index, encoded) in x5c.enumerated() {
            guard let der = Data(base64Encoded: encoded), let certificate = try? Certificate(derEncoded: Array(der)) else {
                throw AppStoreVerificationError(.invalidCertificateChain, "x5c[\(index)] is not a base64 DER certificate.", field: field)
            }
            chain.append(certificate)
        }
        guard let signedDate else {
            throw AppStoreVerificationError(.invalidPayload,
                                            "The JWS payload must be a JSON object with 'signedDate' in milliseconds since 1970.", field: field)
        }
        try await verifyChain(leaf: chain[0], intermediate: chain[1], root: chain[2], at: signedDate, field: field)
        guard let key = P256.Signing.PublicKey(chain[0].publicKey) else {
            throw AppStoreVerificationError(.invalidCertificateChain, "The leaf certificate's key is not a P-256 key.", field: field)
        }
        verifiedChains.insert(VerifiedChainCache.Entry(key: key.rawRepresentation, validFrom: chain.map(\.notValidBefore).max() ?? signedDate,
                                                       validUntil: chain.map(\.notValidAfter).min() ?? signedDate),
                              for: VerifiedChainCache.key(x5c))
        return key
    }

    /// Pre-checks give each failure its own code; `X509.Verifier` then has the
    /// last word (signatures along the chain, CA constraints, validity again).
    private func verifyChain(leaf: Certificate, intermediate: Certificate, root: Certificate, at signedDate: Date,
                             field: String) async throws(AppStoreVerificationError) {
        guard rootCertificates.contains(root) else {
            throw AppStoreVerificationError(.untrustedRoot,
                                            "The root certificate in x5c (\(root.subject)) is not one of the \(rootCertificates.count) configured in SUBLEDGER_APPSTORE_ROOT_CERTS.",
                                            field: field)
        }
        for (role, certificate) in [("leaf", leaf), ("intermediate", intermediate), ("root", root)]
        where signedDate < certificate.notValidBefore || signedDate > certificate.notValidAfter {
            throw AppStoreVerificationError(.certificateExpired,
                                            "The \(role) certificate (\(certificate.subject)) is valid from \(certificate.notValidBefore) to \(certificate.notValidAfter), not at the payload's signedDate \(signedDate).",
                                            field: field)
        }
        guard leaf.extensions.contains(where: { $0.oid.description == Self.leafMarkerOID }) else {
            throw AppStoreVerificationError(.missingAppleOID,
                                            "The leaf certificate lacks Apple's receipt-signer extension \(Self.leafMarkerOID).", field: field)
        }
        guard intermediate.extensions.contains(where: { $0.oid.description == Self.intermediateMarkerOID }) else {
            throw AppStoreVerificationError(.missingAppleOID,
                                            "The intermediate certificate lacks Apple's WWDR extension \(Self.intermediateMarkerOID).", field: field)
        }

        var verifier = Verifier(rootCertificates: CertificateStore(rootCertificates)) {
            RFC5280Policy(fixedExpiryValidationTime: signedDate)
        }
        switch await verifier.validate(leaf: leaf, intermediates: CertificateStore([intermediate])) {
        case .validCertificate(let validated):
            // The leaf must hang off x5c's intermediate, not straight off a root.
            guard Array(validated) == [leaf, intermediate, root] else {
                throw AppStoreVerificationError(.invalidCertificateChain,
                                                "The leaf does not chain through x5c's intermediate to x5c's root (\(validated.count) certificates).",
                                                field: field)
            }
        case .couldNotValidate(let failures):
            let reasons = failures.map { "\($0.policyFailureReason)" }
            throw AppStoreVerificationError(.invalidCertificateChain,
                                            "The x5c certificates do not form a valid chain to the configured root"
                                                + (reasons.isEmpty ? " (a signature along the chain does not verify)." : ": \(reasons.joined(separator: "; "))."),
                                            field: field)
        }
    }

    private struct SignedDate: Decodable { var signedDate: Date? }

    static let payloadDecoder: JSONDecoder = {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .millisecondsSince1970
        return decoder
    }()

    /// A decoding error as `field 'data.bundleId': expected String`.
    static func describe(_ error: any Error) -> String {
        func path(_ codingPath: [any CodingKey]) -> String {
            codingPath.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }.joined(separator: ".")
        }
        switch error {
        case DecodingError.keyNotFound(let key, let context):
            return "field '\(path(context.codingPath + [key]))' is missing"
        case DecodingError.typeMismatch(let type, let context), DecodingError.valueNotFound(let type, let context):
            return "field '\(path(context.codingPath))' must be \(type)"
        case DecodingError.dataCorrupted(let context):
            return context.codingPath.isEmpty ? "not JSON" : "field '\(path(context.codingPath))' is malformed"
        default:
            return "\(error)"
        }
    }
}

/// A notification whose signatures, chains and bundle id all checked out.
public struct VerifiedNotification: Sendable, Hashable {
    public var payload: NotificationPayload
    /// The verified `data.signedTransactionInfo`, when the notification has one.
    public var transaction: TransactionInfo?
    /// The verified `data.signedRenewalInfo`, when the notification has one.
    public var renewalInfo: RenewalInfo?

    public init(payload: NotificationPayload, transaction: TransactionInfo? = nil, renewalInfo: RenewalInfo? = nil) {
        self.payload = payload
        self.transaction = transaction
        self.renewalInfo = renewalInfo
    }
}
