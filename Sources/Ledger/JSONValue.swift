import Foundation

/// A parsed JSON value, so request and catalog validation can name the exact
/// field that is missing or of the wrong type (JSONDecoder cannot).
enum JSONValue: Sendable, Equatable, Decodable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([JSONValue].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: JSONValue].self))
        }
    }

    static func parse(_ data: Data) -> Result<JSONValue, JSONParseFailure> {
        do {
            return .success(try JSONDecoder().decode(JSONValue.self, from: data))
        } catch let DecodingError.dataCorrupted(context) {
            let underlying = (context.underlyingError as NSError?)?.userInfo[NSDebugDescriptionErrorKey] as? String
            return .failure(JSONParseFailure(detail: underlying ?? context.debugDescription))
        } catch {
            return .failure(JSONParseFailure(detail: "\(error)"))
        }
    }

    /// What a value is, for messages: "a string", "null", ...
    var kindDescription: String {
        switch self {
        case .null: "null"
        case .bool: "a boolean"
        case .number: "a number"
        case .string: "a string"
        case .array: "an array"
        case .object: "an object"
        }
    }
}

struct JSONParseFailure: Error {
    var detail: String
}
