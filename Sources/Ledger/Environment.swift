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
