import Foundation

/// The App Store environment a fact comes from.
public enum Environment: String, Sendable, Hashable, Codable, CaseIterable {
    case production = "Production"
    case sandbox = "Sandbox"
}

/// Where facts come from, as stored in each event's `source`.
public enum FactSource {
    /// The app's backend through the HTTP API.
    public static let api = "api"
    /// `subledger import`.
    public static let `import` = "import"
    /// App Store Server Notifications or receipt validation.
    public static let appStore = "appstore"
    /// Subledger itself (expiry sweeper, reminder dispatcher, transfers).
    public static let subledger = "subledger"
}

extension Environment {
    /// The key under which an original (or other) transaction id is owned
    /// in this environment. Apple numbers Sandbox and Production apart, and a
    /// Sandbox fact must never claim, move or touch a Production purchase, so
    /// ownership is per environment: Production keys are the bare id (as
    /// every row written before environments were kept apart), Sandbox keys
    /// are `Sandbox` + U+001F + the id. No identifier contains a control
    /// character (`InputLimits`), so no Production id can equal a Sandbox key.
    public func ownershipKey(_ transactionID: String) -> String {
        switch self {
        case .production: transactionID
        case .sandbox: Self.sandboxKeyPrefix + transactionID
        }
    }

    /// The environment and bare id of an ownership key.
    public static func parseOwnershipKey(_ key: String) -> (environment: Environment, transactionID: String) {
        key.hasPrefix(sandboxKeyPrefix) ? (.sandbox, String(key.dropFirst(sandboxKeyPrefix.count))) : (.production, key)
    }

    static let sandboxKeyPrefix = "Sandbox\u{1F}"
}
