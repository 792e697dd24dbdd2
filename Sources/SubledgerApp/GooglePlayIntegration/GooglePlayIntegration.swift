import AsyncHTTPClient
import Foundation
import GooglePlay
import Ledger
import Logging
import NIOCore
import ServiceLifecycle

/// Google Play's side of the application, beside `AppStoreIntegration`:
/// the push endpoint's token check, the service that records fetched
/// purchases, and the two workers (acknowledgements, voided purchases).
///
/// Not configured at all (no `SUBLEDGER_GOOGLEPLAY_*` variable) is a choice:
/// the routes answer 503 `googleplay_not_configured` and `serve` notes it
/// once. Configured in part, or with a key file that does not read, is an
/// error `make` throws, which stops `serve` naming the variable to fix.
public struct GooglePlayIntegration: Sendable {
    public let service: GooglePlayService?
    /// Checks the push's OIDC token against Google's keys.
    public let pushKeys: JWKSCache?
    public let acknowledger: GooglePlayAcknowledger?
    public let reconciler: GooglePlayVoidedReconciler?
    /// Why `service` is nil.
    public let unavailable: String

    /// Off: what the routes answer instead.
    public init(unavailable: String) {
        service = nil
        pushKeys = nil
        acknowledger = nil
        reconciler = nil
        self.unavailable = unavailable
    }

    public init(service: GooglePlayService, pushKeys: JWKSCache, acknowledger: GooglePlayAcknowledger,
                reconciler: GooglePlayVoidedReconciler) {
        self.service = service
        self.pushKeys = pushKeys
        self.acknowledger = acknowledger
        self.reconciler = reconciler
        unavailable = ""
    }

    public static let notConfigured = "Google Play is not configured: set SUBLEDGER_GOOGLEPLAY_PACKAGE_NAME, SUBLEDGER_GOOGLEPLAY_SERVICE_ACCOUNT_FILE, SUBLEDGER_GOOGLEPLAY_PUSH_AUDIENCE and SUBLEDGER_GOOGLEPLAY_PUSH_SERVICE_ACCOUNT (docs/googleplay.md)."

    /// The integration the configuration describes, with `writer` as its
    /// write path. `dependencies.googlePlaySource` replaces the Play
    /// Developer API client and `googlePlayKeys` the JWKS download (tests
    /// point both at a fake Google).
    public static func make(_ dependencies: AppDependencies, writer: LedgerWriter,
                            reader: SubscriberReader) throws(ConfigurationError) -> GooglePlayIntegration {
        let configuration = dependencies.configuration.googlePlay
        let source = dependencies.googlePlaySource
        let fetchKeys = dependencies.googlePlayKeys
        guard configuration.isRequested || source != nil else { return GooglePlayIntegration(unavailable: notConfigured) }
        func required(_ value: String?, _ variable: ConfigurationVariable, _ what: String) throws(ConfigurationError) -> String {
            guard let value else { throw ConfigurationError(variable: variable.name, message: "not set: Google Play needs \(what)") }
            return value
        }
        let packageName = try required(configuration.packageName, .googlePlayPackageName, "the app's package name")
        let audience = try required(configuration.pushAudience, .googlePlayPushAudience,
                                    "the audience of the Pub/Sub push subscription's token")
        let pushAccount = try required(configuration.pushServiceAccount, .googlePlayPushServiceAccount,
                                       "the service account email the push subscription authenticates as")
        let logger = dependencies.logger
        let purchases: any GooglePlayPurchaseSource
        if let source {
            purchases = source
        } else {
            let file = try required(configuration.serviceAccountFile, .googlePlayServiceAccountFile,
                                    "the service account's JSON key to call the Play Developer API")
            purchases = try makeClient(keyFile: file, packageName: packageName, apiURL: configuration.apiURL, logger: logger)
        }
        let jwksURL = configuration.jwksURL
        let keys = JWKSCache(verifier: GoogleIDTokenVerifier(audience: audience, serviceAccountEmail: pushAccount),
                             fetch: fetchKeys ?? { try await Self.download(jwksURL) })
        let service = GooglePlayService(source: purchases, packageName: packageName, environments: configuration.environments,
                                        writer: writer, reader: reader, logger: logger)
        return GooglePlayIntegration(
            service: service, pushKeys: keys,
            acknowledger: GooglePlayAcknowledger(source: purchases, pool: dependencies.pool,
                                                 logger: Logger(label: "subledger.googleplay.acknowledge")),
            reconciler: GooglePlayVoidedReconciler(source: purchases, writer: writer, interval: configuration.reconcileInterval,
                                                   logger: Logger(label: "subledger.googleplay.reconcile")))
    }

    /// Google's published keys (`SUBLEDGER_GOOGLEPLAY_JWKS_URL`).
    static func download(_ url: String) async throws -> Data {
        var request = HTTPClientRequest(url: url)
        request.headers.add(name: "Accept", value: "application/json")
        request.headers.add(name: "User-Agent", value: "subledger")
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(10))
        guard response.status == .ok else {
            throw ServiceError(.upstreamUnavailable, code: .googlePlayUnavailable,
                               message: "Google's keys at \(url) answered HTTP \(response.status.code)")
        }
        let body = try await response.body.collect(upTo: 1 << 20)
        return Data(body.readableBytesView)
    }

    /// The service, or the error the routes answer (503 `googleplay_not_configured`).
    public func requireService() throws(ServiceError) -> GooglePlayService {
        guard let service else { throw ServiceError(.notConfigured, code: .googlePlayNotConfigured, message: unavailable) }
        return service
    }
}

extension GooglePlayIntegration {
    /// Checks Google Play's configuration for `serve`: off by choice is
    /// nil (noted once); set in part, or with a key file that does not
    /// read, throws naming the variable, and `serve` stops.
    public static func check(_ dependencies: AppDependencies) throws(ConfigurationError) -> GooglePlayIntegration? {
        guard dependencies.configuration.googlePlay.isRequested || dependencies.googlePlaySource != nil else {
            dependencies.logger.notice("Google Play is off: set the SUBLEDGER_GOOGLEPLAY_* variables to record Play purchases (docs/googleplay.md)")
            return nil
        }
        return try make(dependencies, writer: LedgerWriter(dependencies), reader: SubscriberReader(dependencies))
    }
}

/// The acknowledgement and voided-purchase workers, when Play is configured.
public func makeGooglePlayServices(_ integration: GooglePlayIntegration?) -> [any Service] {
    guard let integration, let acknowledger = integration.acknowledger, let reconciler = integration.reconciler else { return [] }
    return reconciler.interval == nil ? [acknowledger] : [acknowledger, reconciler]
}
