import Foundation
import JSON

/// The body of a Pub/Sub push to `POST /v1/googleplay/notifications`:
/// `{"message": {"data", "messageId", "publishTime", "attributes"},
/// "subscription"}`, with the `DeveloperNotification` its `data` holds.
/// Pub/Sub delivers at least once: `messageID` is what makes a repeat
/// recognisable.
/// https://cloud.google.com/pubsub/docs/push#receive_push
/// https://developer.android.com/google/play/billing/rtdn-reference#encoding
public struct PubSubPush: Sendable, Hashable {
    /// `message.messageId` (Pub/Sub also writes it `message_id`).
    public var messageID: String
    /// `message.publishTime` (or `publish_time`), when Pub/Sub received it.
    public var publishTime: Date?
    public var attributes: [String: String]
    /// The push subscription's path, `projects/…/subscriptions/…`.
    public var subscription: String?
    public var notification: DeveloperNotification

    public init(messageID: String, publishTime: Date? = nil, attributes: [String: String] = [:], subscription: String? = nil,
                notification: DeveloperNotification) {
        self.messageID = messageID
        self.publishTime = publishTime
        self.attributes = attributes
        self.subscription = subscription
        self.notification = notification
    }

    /// Parses and bounds a push body (`GooglePlayLimits`). Everything wrong
    /// with it is the sender's fault: `error.ledgerError` is a 400.
    public static func parse(body: Data) throws(GooglePlayParseError) -> PubSubPush {
        guard body.count <= GooglePlayLimits.maximumPushBodyBytes else {
            throw GooglePlayParseError(.invalidJSON, field: "",
                                       message: "A Pub/Sub push body holds at most \(GooglePlayLimits.maximumPushBodyBytes) bytes, got \(body.count).")
        }
        let root = try FieldReader.document(body, expected: "a Pub/Sub push {\"message\": {...}, \"subscription\": \"...\"}")
        let message = try root.require(root.object("message"), "message", "the Pub/Sub message, an object")
        let camelID = try message.string("messageId")
        let snakeID = try message.string("message_id")
        guard let messageID = camelID ?? snakeID, !messageID.isEmpty else {
            throw .missing(message.name("messageId"), expected: "the Pub/Sub message id, a non-empty string")
        }
        let camelTime = try message.rfc3339("publishTime")
        let snakeTime = try message.rfc3339("publish_time")
        let publishTime = camelTime ?? snakeTime
        let attributes = try Self.attributes(message)
        let subscription = try root.string("subscription")

        let text = try message.require(message.string("data", maximumBytes: GooglePlayLimits.maximumDataBytes), "data",
                                       "the base64 of a DeveloperNotification")
        guard let data = Data(base64Encoded: text) else {
            throw .invalid(message.name("data"), expected: "base64 (RFC 4648 §4, padded) of a DeveloperNotification", got: "other text")
        }
        let notification = try DeveloperNotification.parse(json: data, path: message.name("data"))
        return PubSubPush(messageID: messageID, publishTime: publishTime, attributes: attributes, subscription: subscription,
                          notification: notification)
    }

    private static func attributes(_ message: FieldReader) throws(GooglePlayParseError) -> [String: String] {
        guard let object = try message.object("attributes") else { return [:] }
        guard object.fields.count <= GooglePlayLimits.maximumAttributes else {
            throw .invalid(object.path, expected: "at most \(GooglePlayLimits.maximumAttributes) attributes", got: "\(object.fields.count)")
        }
        var attributes: [String: String] = [:]
        for key in object.fields.keys {
            guard key.utf8.count <= GooglePlayLimits.maximumAttributeKeyBytes else {
                throw .invalid(object.path, expected: "attribute names of at most \(GooglePlayLimits.maximumAttributeKeyBytes) bytes",
                               got: "\(key.utf8.count) bytes")
            }
            attributes[key] = try object.string(key, maximumBytes: GooglePlayLimits.maximumAttributeValueBytes)
        }
        return attributes
    }
}
