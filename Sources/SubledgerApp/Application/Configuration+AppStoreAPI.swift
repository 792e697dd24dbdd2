import Foundation
import Ledger

/// `SUBLEDGER_RESTORE_VERIFY`: what a plain restore (fields sent by the app)
/// must pass before it is recorded.
public enum RestoreVerification: String, Sendable {
    /// The fields are trusted as sent (the app's backend vouches for them).
    case none
    /// Every restored transaction is looked up with Get Transaction History
    /// and recorded with Apple's data; one Apple does not list is refused.
    case api
}

extension SubledgerConfiguration {
    /// Whether the App Store Server API is configured (key, key id, issuer id).
    public var hasAppStoreAPIKey: Bool {
        appStoreKeyFile != nil || appStoreKeyID != nil || appStoreIssuerID != nil
    }

    /// The environments reconciliation asks about: Production, unless
    /// `SUBLEDGER_APPSTORE_ENVIRONMENTS` lists only Sandbox.
    public var reconcileEnvironments: [Ledger.Environment] {
        appStoreEnvironments == [.sandbox] ? [.sandbox] : [.production]
    }
}

/// ISO 8601 durations of clock time for intervals (`PT1H`, `PT15M`, `P1D`,
/// `P1DT12H`, `PT30S`, `P0D`): weeks, days, hours, minutes and seconds, all of
/// fixed length. Months and years are refused (their length varies).
public enum ClockDuration {
    public struct ParseError: Error, CustomStringConvertible, Sendable {
        public var description: String
    }

    public static func parse(_ text: String) throws(ParseError) -> Duration {
        func fail(_ reason: String) -> ParseError {
            ParseError(description: "\"\(text.prefix(64))\" is not an ISO 8601 duration such as PT1H, PT15M or P1D: \(reason)")
        }
        var rest = Substring(text.uppercased())
        guard rest.first == "P" else { throw fail("it must start with P") }
        rest = rest.dropFirst()
        guard !rest.isEmpty, rest != "T" else { throw fail("it has no parts") }
        let dateUnits: [Character: Int64] = ["W": 604_800, "D": 86_400]
        let timeUnits: [Character: Int64] = ["H": 3600, "M": 60, "S": 1]
        var inTime = false
        var seen = Set<String>()
        var seconds: Int64 = 0
        while !rest.isEmpty {
            if rest.first == "T" {
                guard !inTime else { throw fail("T appears twice") }
                inTime = true
                rest = rest.dropFirst()
                guard !rest.isEmpty else { throw fail("nothing follows T") }
                continue
            }
            let digits = rest.prefix { $0.isASCII && $0.isNumber }
            guard !digits.isEmpty, digits.count <= 9, let number = Int64(digits) else {
                throw fail("expected a whole number of at most 9 digits")
            }
            rest = rest.dropFirst(digits.count)
            guard let unit = rest.first else { throw fail("a number has no unit") }
            rest = rest.dropFirst()
            guard let factor = (inTime ? timeUnits : dateUnits)[unit] else {
                throw fail(inTime ? "time units are H, M and S" : "date units are W and D (months and years vary in length)")
            }
            guard seen.insert("\(inTime)\(unit)").inserted else { throw fail("\(unit) appears twice") }
            seconds += number * factor
        }
        return .seconds(seconds)
    }
}
