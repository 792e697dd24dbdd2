import Foundation
import JSON

/// JSON coders for the ledger's persisted and served values: camelCase keys,
/// RFC 3339 UTC dates with milliseconds when not zero (`RFC3339.format`),
/// sorted keys so equal values encode to equal bytes. The served types
/// (`SubscriberState`, `Explanation`, `DesiredReminder`) rely on this
/// encoder's date strategy: encode them with it.
public enum LedgerJSON {
    public static func makeEncoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(RFC3339.format(date))
        }
        return encoder
    }

    public static func makeDecoder() -> JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            let container = try decoder.singleValueContainer()
            let text = try container.decode(String.self)
            guard let date = RFC3339.parse(text) else {
                throw DecodingError.dataCorruptedError(in: container, debugDescription: "\"\(text)\" is not an RFC 3339 date-time")
            }
            return date
        }
        return decoder
    }
}

/// An optional that encodes `nil` as an explicit `null` where the contract
/// shows one (`"expiresAt": null`), instead of leaving the key out as
/// synthesized `Encodable` does.
@propertyWrapper
public struct ExplicitNull<Value: Sendable & Hashable & Encodable>: Sendable, Hashable, Encodable {
    public var wrappedValue: Value?

    public init(wrappedValue: Value?) {
        self.wrappedValue = wrappedValue
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        if let wrappedValue {
            try container.encode(wrappedValue)
        } else {
            try container.encodeNil()
        }
    }
}

extension ExplicitNull: Decodable where Value: Decodable {
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        wrappedValue = container.decodeNil() ? nil : try container.decode(Value.self)
    }
}
