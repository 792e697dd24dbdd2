import Foundation
import Ledger

/// Google Play's variables (`SUBLEDGER_GOOGLEPLAY_*`), checked for shape
/// here; whether the key file reads and the package name fits is checked
/// when `serve` starts (`GooglePlayIntegration`), which stops with a clear
/// message when it does not.
public struct GooglePlayConfiguration: Sendable {
    public var packageName: String?
    public var serviceAccountFile: String?
    public var apiURL: String
    public var pushAudience: String?
    public var pushServiceAccount: String?
    public var jwksURL: String
    /// nil: the voided-purchase worker is off (`P0D`).
    public var reconcileInterval: Duration?
    public var environments: Set<Ledger.Environment>

    /// Whether any Play variable is set: when none is, Play is off by choice
    /// (one notice at start); when some are, a missing or bad one is an error.
    public var isRequested: Bool {
        packageName != nil || serviceAccountFile != nil || pushAudience != nil || pushServiceAccount != nil
    }

    /// Reads the Play variables from `environment`, unset ones at their defaults.
    public init(environment: [String: String]) throws(ConfigurationError) {
        try self.init { variable in
            guard let raw = environment[variable.name]?.trimmingCharacters(in: .whitespaces), !raw.isEmpty else {
                return variable.defaultValue
            }
            return raw
        }
    }

    init(value: (ConfigurationVariable) -> String?) throws(ConfigurationError) {
        func fail(_ variable: ConfigurationVariable, _ message: String) -> ConfigurationError {
            ConfigurationError(variable: variable.name, message: message)
        }
        packageName = value(.googlePlayPackageName)
        if let name = packageName {
            // Java package names: dot-separated segments of letters, digits and underscores.
            // https://developer.android.com/build/configure-app-module#set-application-id
            let segments = name.split(separator: ".", omittingEmptySubsequences: false)
            guard segments.count >= 2, name.utf8.count <= 255, segments.allSatisfy({ segment in
                guard let first = segment.first, first.isASCII, first.isLetter else { return false }
                return segment.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") }
            }) else {
                throw fail(.googlePlayPackageName, "expected an application id such as com.example.app, got \(name.prefix(64))")
            }
        }
        serviceAccountFile = value(.googlePlayServiceAccountFile)
        pushAudience = value(.googlePlayPushAudience)
        pushServiceAccount = value(.googlePlayPushServiceAccount)
        apiURL = value(.googlePlayAPIURL) ?? ""
        jwksURL = value(.googlePlayJWKSURL) ?? ""
        for (variable, url) in [(ConfigurationVariable.googlePlayAPIURL, apiURL), (.googlePlayJWKSURL, jwksURL)] {
            guard let parsed = URL(string: url), ["http", "https"].contains(parsed.scheme ?? ""), parsed.host != nil else {
                throw fail(variable, "expected an http(s) URL, got \(url.prefix(200))")
            }
        }
        let reconcile = value(.googlePlayReconcileInterval) ?? ""
        do {
            let interval = try ClockDuration.parse(reconcile)
            reconcileInterval = interval == .zero ? nil : interval
        } catch {
            throw fail(.googlePlayReconcileInterval, error.description)
        }
        if let interval = reconcileInterval, interval < .seconds(60) {
            throw fail(.googlePlayReconcileInterval, "expected at least PT1M (or P0D to turn reconciliation off), got \(reconcile)")
        }
        var accepted = Set<Ledger.Environment>()
        for item in (value(.googlePlayEnvironments) ?? "").split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces) }) {
            switch item.lowercased() {
            case "production": accepted.insert(.production)
            case "sandbox": accepted.insert(.sandbox)
            default: throw fail(.googlePlayEnvironments, "expected Production, Sandbox or both separated by a comma, got \(item.prefix(64))")
            }
        }
        guard !accepted.isEmpty else { throw fail(.googlePlayEnvironments, "names no environment") }
        environments = accepted
    }
}
