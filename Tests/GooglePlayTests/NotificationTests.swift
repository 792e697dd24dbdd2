import Foundation
import GooglePlay
import GooglePlayTesting
import JSON
import Ledger
import Testing

/// Wraps a DeveloperNotification's JSON text in a push, as Pub/Sub sends it.
private func push(_ notificationJSON: String, messageID: String = "136969346945") -> Data {
    GooglePlaySamples.data(GooglePlaySamples.pushEnvelope(data: Data(notificationJSON.utf8), messageID: messageID))
}

/// Parses a push whose envelope was changed by `change`.
private func parseEnvelope(_ change: (JSONValue) -> JSONValue) throws -> PubSubPush {
    let data = GooglePlaySamples.data(GooglePlaySamples.developerNotification(.subscription(.renewed)))
    return try PubSubPush.parse(body: change(GooglePlaySamples.pushEnvelope(data: data)).data)
}

/// Parses a push of a DeveloperNotification changed by `change`.
private func parseNotification(_ change: (JSONValue) -> JSONValue) throws -> PubSubPush {
    let notification = change(GooglePlaySamples.developerNotification(.subscription(.renewed)))
    return try PubSubPush.parse(body: GooglePlaySamples.pushEnvelope(data: notification.data).data)
}

@Suite struct NotificationTests {
    // https://developer.android.com/google/play/billing/rtdn-reference#sub — the table of notificationType values.
    @Test("Each subscription notificationType Google documents reads with its name",
          arguments: [
              (1, "SUBSCRIPTION_RECOVERED"), (2, "SUBSCRIPTION_RENEWED"), (3, "SUBSCRIPTION_CANCELED"),
              (4, "SUBSCRIPTION_PURCHASED"), (5, "SUBSCRIPTION_ON_HOLD"), (6, "SUBSCRIPTION_IN_GRACE_PERIOD"),
              (7, "SUBSCRIPTION_RESTARTED"), (8, "SUBSCRIPTION_PRICE_CHANGE_CONFIRMED"), (9, "SUBSCRIPTION_DEFERRED"),
              (10, "SUBSCRIPTION_PAUSED"), (11, "SUBSCRIPTION_PAUSE_SCHEDULE_CHANGED"), (12, "SUBSCRIPTION_REVOKED"),
              (13, "SUBSCRIPTION_EXPIRED"), (17, "SUBSCRIPTION_ITEMS_CHANGED"), (18, "SUBSCRIPTION_CANCELLATION_SCHEDULED"),
              (19, "SUBSCRIPTION_PRICE_CHANGE_UPDATED"), (20, "SUBSCRIPTION_PENDING_PURCHASE_CANCELED"),
          ])
    func subscriptionNotificationType(number: Int, name: String) throws {
        let json = #"{"version":"1.0","packageName":"com.some.package","eventTimeMillis":"1503349566168","#
            + #""subscriptionNotification":{"version":"1.0","notificationType":\#(number),"purchaseToken":"PURCHASE_TOKEN","subscriptionId":"monthly.subscription"}}"#
        let notification = try PubSubPush.parse(body: push(json)).notification
        let subscription = try #require(notification.subscriptionNotification)
        #expect(subscription.notificationType.rawValue == number)
        #expect(subscription.notificationType.googleName == name)
        #expect(SubscriptionNotificationType.documented.contains(subscription.notificationType))
        #expect(subscription.purchaseToken == "PURCHASE_TOKEN")
        #expect(subscription.subscriptionID == "monthly.subscription")
        #expect(subscription.version == "1.0")
        #expect(notification.packageName == "com.some.package")
        #expect(notification.eventTime == Date(timeIntervalSince1970: 1_503_349_566.168))
        #expect(notification.purchaseToken == "PURCHASE_TOKEN")
        #expect(notification.oneTimeProductNotification == nil && notification.voidedPurchaseNotification == nil)
    }

    // https://developer.android.com/google/play/billing/rtdn-reference#sub — a number Google adds later is kept, not refused.
    @Test func anUnknownSubscriptionTypeIsKept() throws {
        let push = try PubSubPush.parse(body: GooglePlaySamples.push(.subscription(.unknown(22), subscriptionID: nil)))
        let subscription = try #require(push.notification.subscriptionNotification)
        #expect(subscription.notificationType == .unknown(22))
        #expect(subscription.notificationType.rawValue == 22)
        #expect(subscription.subscriptionID == nil)
    }

    // https://developer.android.com/google/play/billing/rtdn-reference#one-time
    @Test("One-time product notifications: ONE_TIME_PRODUCT_PURCHASED (1) and ONE_TIME_PRODUCT_CANCELED (2)",
          arguments: [(1, "ONE_TIME_PRODUCT_PURCHASED"), (2, "ONE_TIME_PRODUCT_CANCELED")])
    func oneTimeProductNotification(number: Int, name: String) throws {
        let json = #"{"version":"1.0","packageName":"com.some.package","eventTimeMillis":"1503349566168","#
            + #""oneTimeProductNotification":{"version":"1.0","notificationType":\#(number),"purchaseToken":"PURCHASE_TOKEN","sku":"my.sku"}}"#
        let notification = try PubSubPush.parse(body: push(json)).notification
        let product = try #require(notification.oneTimeProductNotification)
        #expect(product.notificationType.rawValue == number)
        #expect(product.notificationType.googleName == name)
        #expect(product.sku == "my.sku")
        #expect(product.purchaseToken == "PURCHASE_TOKEN")
        #expect(notification.subscriptionNotification == nil)
    }

    // https://developer.android.com/google/play/billing/rtdn-reference#voided-purchase
    @Test func voidedPurchaseNotification() throws {
        let json = #"{"version":"1.0","packageName":"com.some.package","eventTimeMillis":"1503349566168","#
            + #""voidedPurchaseNotification":{"purchaseToken":"PURCHASE_TOKEN","orderId":"GS.0000-0000-0000","productType":1,"refundType":1}}"#
        let notification = try PubSubPush.parse(body: push(json)).notification
        let voided = try #require(notification.voidedPurchaseNotification)
        #expect(voided.purchaseToken == "PURCHASE_TOKEN")
        #expect(voided.orderID == "GS.0000-0000-0000")
        #expect(voided.productType == .subscription)
        #expect(voided.refundType == .fullRefund)
        // The notification has no voidedTimeMillis: the fact is voided at the event's time.
        let fact = try #require(notification.voidFact())
        #expect(fact == GooglePlayVoid(purchaseToken: "PURCHASE_TOKEN", orderID: "GS.0000-0000-0000",
                                       voidedAt: Date(timeIntervalSince1970: 1_503_349_566.168)))
    }

    // https://developer.android.com/google/play/billing/rtdn-reference#voided-purchase — PRODUCT_TYPE_ONE_TIME, partial refund.
    @Test func voidedOneTimePurchaseWithAPartialRefund() throws {
        let body = GooglePlaySamples.push(.voidedPurchase(productType: 2, refundType: 2))
        let voided = try #require(try PubSubPush.parse(body: body).notification.voidedPurchaseNotification)
        #expect(voided.productType == .oneTime)
        #expect(voided.refundType == .quantityBasedPartialRefund)
    }

    // https://developer.android.com/google/play/billing/rtdn-reference#test
    @Test func testNotification() throws {
        let json = #"{"version":"1.0","packageName":"com.some.package","eventTimeMillis":"1503349566168","testNotification":{"version":"1.0"}}"#
        let notification = try PubSubPush.parse(body: push(json)).notification
        #expect(notification.testNotification == DeveloperNotification.TestNotification(version: "1.0"))
        #expect(notification.purchaseToken == nil)
        #expect(notification.voidFact() == nil)
    }

    // https://developer.android.com/google/play/billing/rtdn-reference#encoding — eventTimeMillis is a "long": a number reads too.
    @Test func eventTimeMillisMayBeANumber() throws {
        let json = #"{"version":"1.0","packageName":"com.some.package","eventTimeMillis":1503349566168,"testNotification":{"version":"1.0"}}"#
        #expect(try PubSubPush.parse(body: push(json)).notification.eventTime == Date(timeIntervalSince1970: 1_503_349_566.168))
    }

    // https://cloud.google.com/pubsub/docs/push#receive_push — the envelope's fields, both spellings.
    @Test func theEnvelopeIsRead() throws {
        let data = GooglePlaySamples.data(GooglePlaySamples.developerNotification(.subscription(.purchased)))
        let envelope = GooglePlaySamples.pushEnvelope(data: data, messageID: "2070443601311540", attributes: ["origin": "play"])
        let push = try PubSubPush.parse(body: envelope.data)
        #expect(push.messageID == "2070443601311540")
        // Nine fraction digits, kept to the millisecond.
        #expect(push.publishTime == RFC3339.parse("2024-03-01T12:00:06.123Z"))
        #expect(push.attributes == ["origin": "play"])
        #expect(push.subscription == "projects/example-project/subscriptions/play-rtdn")
        #expect(push.notification.packageName == GooglePlaySamples.packageName)
        #expect(push.notification.eventTime == GooglePlaySamples.eventTime)

        // Only the snake_case spelling.
        let snake = try parseEnvelope { envelope in
            guard case .object(var message) = envelope["message"] else { return envelope }
            message["messageId"] = nil
            message["publishTime"] = nil
            return envelope.setting("message", .object(message))
        }
        #expect(snake.messageID == "136969346945")
        #expect(snake.publishTime == RFC3339.parse("2024-03-01T12:00:06.123Z"))
    }

    // https://developer.android.com/google/play/billing/rtdn-reference#encoding — a kind of notification added later is not malformed.
    @Test func aNotificationOfAnotherKindIsKeptAsOther() throws {
        let push = try parseNotification { notification in
            notification.setting("subscriptionNotification", nil).setting("futureKindNotification", .object(["version": .string("1.0")]))
        }
        #expect(push.notification.content == .other("futureKindNotification"))
    }

    // MARK: Refusals

    // https://developer.android.com/google/play/billing/rtdn-reference#encoding — each refusal names its field.
    @Test func malformedPushesNameTheField() throws {
        func refusal(_ body: () throws -> PubSubPush) -> GooglePlayParseError? {
            #expect(throws: GooglePlayParseError.self) { _ = try body() }
        }
        #expect(refusal { try PubSubPush.parse(body: Data("not json".utf8)) }?.code == .invalidJSON)
        #expect(refusal { try PubSubPush.parse(body: Data("[]".utf8)) }?.code == .invalidJSON)
        #expect(refusal { try parseEnvelope { $0.setting("message", nil) } }?.field == "message")
        #expect(refusal { try parseEnvelope { $0.setting("message", .string("x")) } }?.field == "message")

        func message(_ key: String, _ value: JSONValue?) -> (JSONValue) -> JSONValue {
            { envelope in
                guard case .object(var message) = envelope["message"] else { return envelope }
                message[key] = value
                return envelope.setting("message", .object(message))
            }
        }
        let notBase64 = refusal { try parseEnvelope(message("data", .string("%%% not base64 %%%"))) }
        #expect(notBase64?.field == "message.data")
        #expect(notBase64?.code == .invalidField)
        #expect(refusal { try parseEnvelope(message("data", .string(Data("not json".utf8).base64EncodedString()))) }?
            .field == "message.data")
        #expect(refusal { try parseEnvelope(message("data", nil)) }?.code == .missingField)
        let idless = refusal { try parseEnvelope { message("message_id", nil)(message("messageId", nil)($0)) } }
        #expect(idless?.field == "message.messageId")
        // Bounds: data, attributes, the whole body.
        let hugeData = String(repeating: "A", count: GooglePlayLimits.maximumDataBytes + 4)
        #expect(refusal { try parseEnvelope(message("data", .string(hugeData))) }?.field == "message.data")
        let manyAttributes = JSONValue.object(Dictionary(uniqueKeysWithValues: (0...100).map { ("k\($0)", JSONValue.string("v")) }))
        #expect(refusal { try parseEnvelope(message("attributes", manyAttributes)) }?.field == "message.attributes")
        let hugeBody = Data(repeating: 0x20, count: GooglePlayLimits.maximumPushBodyBytes + 1)
        #expect(refusal { try PubSubPush.parse(body: hugeBody) }?.code == .invalidJSON)

        // Inside the DeveloperNotification.
        #expect(refusal { try parseNotification { $0.setting("packageName", nil) } }?.field == "message.data.packageName")
        #expect(refusal { try parseNotification { $0.setting("eventTimeMillis", .string("yesterday")) } }?
            .field == "message.data.eventTimeMillis")
        #expect(refusal { try parseNotification { $0.setting("subscriptionNotification", nil) } }?.code == .missingField)
        let both = refusal { try parseNotification { $0.setting("testNotification", .object(["version": .string("1.0")])) } }
        #expect(both?.field == "message.data.testNotification")
        func subscription(_ key: String, _ value: JSONValue?) -> (JSONValue) -> JSONValue {
            { notification in
                guard case .object(var fields) = notification["subscriptionNotification"] else { return notification }
                fields[key] = value
                return notification.setting("subscriptionNotification", .object(fields))
            }
        }
        let longToken = String(repeating: "t", count: GooglePlayLimits.maximumTokenBytes + 1)
        #expect(refusal { try parseNotification(subscription("purchaseToken", .string(longToken))) }?
            .field == "message.data.subscriptionNotification.purchaseToken")
        #expect(refusal { try parseNotification(subscription("purchaseToken", .string("abc\u{1F}def"))) }?
            .field == "message.data.subscriptionNotification.purchaseToken")
        #expect(refusal { try parseNotification(subscription("purchaseToken", .string(""))) }?
            .field == "message.data.subscriptionNotification.purchaseToken")
        let typeAsText = refusal { try parseNotification(subscription("notificationType", .string("4"))) }
        #expect(typeAsText?.field == "message.data.subscriptionNotification.notificationType")
        #expect(typeAsText?.message.contains("whole number") == true)
        #expect(refusal { try parseNotification(subscription("notificationType", nil)) }?.code == .missingField)
    }

    // https://developer.android.com/google/play/billing/rtdn-reference — a refused push is a 400 naming the field.
    @Test func aRefusalIsABadRequest() throws {
        let error = #expect(throws: GooglePlayParseError.self) {
            _ = try parseNotification { $0.setting("packageName", .integer(7)) }
        }
        #expect(error?.ledgerError.kind == .badRequest)
        #expect(error?.ledgerError.field == "message.data.packageName")
        #expect(error?.ledgerError.code == .invalidField)
    }
}
