import Foundation

// The payload of each event type, read member by member (keys as in each
// type's `CodingKeys`); anything these do not accept goes to the reference
// decoder (`LedgerEvent.decodeFast`).
extension StoredPayloadParser {
    mutating func transactionFact() -> TransactionFact? {
        var transactionID = Field<String>(), originalTransactionID = Field<String>(), productID = Field<String>()
        var productType = Field<ProductType>(), group = Field<String>(), duration = Field<ISODuration>()
        var purchaseDate = Field<Date>(), expiresDate = Field<Date>(), quantity = Field<Int>(), autoRenew = Field<Bool>()
        var deviceID = Field<String>(), environment = Field<Environment>(), source = Field<String>()
        var ownershipType = Field<String>(), offerType = Field<Int>(), webOrderLineItemID = Field<String>()
        var isUpgraded = Field<Bool>(), price = Field<Amount>(), currency = Field<String>(), offerDiscount = Field<OfferDiscount>()
        var storefront = Field<String>()
        let read = members { parser, key in
            switch true {
            case key == "transactionId": parser.read(&transactionID) { $0.string() }
            case key == "originalTransactionId": parser.read(&originalTransactionID) { $0.string() }
            case key == "productId": parser.read(&productID) { $0.string() }
            case key == "productType": parser.read(&productType, nullable: true) { $0.rawValue() }
            case key == "group": parser.read(&group, nullable: true) { $0.string() }
            case key == "duration": parser.read(&duration, nullable: true) { $0.duration() }
            case key == "purchaseDate": parser.read(&purchaseDate) { $0.date() }
            case key == "expiresDate": parser.read(&expiresDate, nullable: true) { $0.date() }
            case key == "quantity": parser.read(&quantity) { $0.integer() }
            case key == "autoRenew": parser.read(&autoRenew, nullable: true) { $0.boolean() }
            case key == "deviceId": parser.read(&deviceID, nullable: true) { $0.string() }
            case key == "environment": parser.read(&environment) { $0.rawValue() }
            case key == "source": parser.read(&source) { $0.string() }
            // Apple's details come last: most stored transactions have none.
            case key == "ownershipType": parser.read(&ownershipType, nullable: true) { $0.string() }
            case key == "offerType": parser.read(&offerType, nullable: true) { $0.integer() }
            case key == "webOrderLineItemId": parser.read(&webOrderLineItemID, nullable: true) { $0.string() }
            case key == "isUpgraded": parser.read(&isUpgraded, nullable: true) { $0.boolean() }
            case key == "price": parser.read(&price, nullable: true) { $0.string().flatMap(Amount.init(decimal:)) }
            case key == "currency": parser.read(&currency, nullable: true) { $0.string() }
            case key == "offerDiscount": parser.read(&offerDiscount, nullable: true) { $0.rawValue() }
            case key == "storefront": parser.read(&storefront, nullable: true) { $0.string() }
            default: false
            }
        }
        guard read, let transactionID = transactionID.value, let originalTransactionID = originalTransactionID.value,
              let productID = productID.value, let purchaseDate = purchaseDate.value, let quantity = quantity.value,
              let environment = environment.value, let source = source.value
        else { return nil }
        return TransactionFact(transactionID: transactionID, originalTransactionID: originalTransactionID, productID: productID,
                               productType: productType.value, group: group.value, duration: duration.value,
                               purchaseDate: purchaseDate, expiresDate: expiresDate.value, quantity: quantity,
                               autoRenew: autoRenew.value, deviceID: deviceID.value, environment: environment, source: source,
                               details: AppleTransactionDetails(ownershipType: ownershipType.value, offerType: offerType.value,
                                                                webOrderLineItemID: webOrderLineItemID.value,
                                                                isUpgraded: isUpgraded.value,
                                                                sale: SaleTerms(price: price.value, currency: currency.value,
                                                                                offerDiscount: offerDiscount.value,
                                                                                storefront: storefront.value)))
    }

    mutating func refundFact() -> RefundFact? {
        var transactionID = Field<String>(), originalTransactionID = Field<String>(), productID = Field<String>()
        var revocationDate = Field<Date>(), reason = Field<String>(), environment = Field<Environment>(), source = Field<String>()
        var revocationReason = Field<Int>(), revocationType = Field<String>(), revocationPercentage = Field<Int>()
        let read = members { parser, key in
            switch true {
            case key == "transactionId": parser.read(&transactionID) { $0.string() }
            case key == "originalTransactionId": parser.read(&originalTransactionID) { $0.string() }
            case key == "productId": parser.read(&productID) { $0.string() }
            case key == "revocationDate": parser.read(&revocationDate) { $0.date() }
            case key == "reason": parser.read(&reason, nullable: true) { $0.string() }
            case key == "environment": parser.read(&environment) { $0.rawValue() }
            case key == "source": parser.read(&source) { $0.string() }
            case key == "revocationReason": parser.read(&revocationReason, nullable: true) { $0.integer() }
            case key == "revocationType": parser.read(&revocationType, nullable: true) { $0.string() }
            case key == "revocationPercentage": parser.read(&revocationPercentage, nullable: true) { $0.integer() }
            default: false
            }
        }
        guard read, let transactionID = transactionID.value, let originalTransactionID = originalTransactionID.value,
              let productID = productID.value, let revocationDate = revocationDate.value, let environment = environment.value,
              let source = source.value
        else { return nil }
        return RefundFact(transactionID: transactionID, originalTransactionID: originalTransactionID, productID: productID,
                          revocationDate: revocationDate, reason: reason.value, environment: environment, source: source,
                          details: AppleRevocationDetails(revocationReason: revocationReason.value,
                                                          revocationType: revocationType.value,
                                                          revocationPercentage: revocationPercentage.value))
    }

    mutating func refundReversal() -> RefundReversal? {
        var transactionID = Field<String>(), originalTransactionID = Field<String>(), productID = Field<String>()
        var date = Field<Date>(), reason = Field<String>(), environment = Field<Environment>(), source = Field<String>()
        let read = members { parser, key in
            switch true {
            case key == "transactionId": parser.read(&transactionID) { $0.string() }
            case key == "originalTransactionId": parser.read(&originalTransactionID) { $0.string() }
            case key == "productId": parser.read(&productID) { $0.string() }
            case key == "date": parser.read(&date) { $0.date() }
            case key == "reason": parser.read(&reason, nullable: true) { $0.string() }
            case key == "environment": parser.read(&environment) { $0.rawValue() }
            case key == "source": parser.read(&source) { $0.string() }
            default: false
            }
        }
        guard read, let transactionID = transactionID.value, let originalTransactionID = originalTransactionID.value,
              let productID = productID.value, let date = date.value, let environment = environment.value, let source = source.value
        else { return nil }
        return RefundReversal(transactionID: transactionID, originalTransactionID: originalTransactionID, productID: productID,
                              date: date, reason: reason.value, environment: environment, source: source)
    }

    mutating func renewalExtension() -> RenewalExtension? {
        var transactionID = Field<String>(), originalTransactionID = Field<String>(), productID = Field<String>()
        var expiresDate = Field<Date>(), effectiveDate = Field<Date>(), environment = Field<Environment>(), source = Field<String>()
        let read = members { parser, key in
            switch true {
            case key == "transactionId": parser.read(&transactionID) { $0.string() }
            case key == "originalTransactionId": parser.read(&originalTransactionID) { $0.string() }
            case key == "productId": parser.read(&productID) { $0.string() }
            case key == "expiresDate": parser.read(&expiresDate) { $0.date() }
            case key == "effectiveDate": parser.read(&effectiveDate) { $0.date() }
            case key == "environment": parser.read(&environment) { $0.rawValue() }
            case key == "source": parser.read(&source) { $0.string() }
            default: false
            }
        }
        guard read, let transactionID = transactionID.value, let originalTransactionID = originalTransactionID.value,
              let productID = productID.value, let expiresDate = expiresDate.value, let effectiveDate = effectiveDate.value,
              let environment = environment.value, let source = source.value
        else { return nil }
        return RenewalExtension(transactionID: transactionID, originalTransactionID: originalTransactionID, productID: productID,
                                expiresDate: expiresDate, effectiveDate: effectiveDate, environment: environment, source: source)
    }

    mutating func expiryFact() -> ExpiryFact? {
        var originalTransactionID = Field<String>(), group = Field<String>(), productID = Field<String>()
        var expiresDate = Field<Date>(), reason = Field<String>(), environment = Field<Environment>(), source = Field<String>()
        let read = members { parser, key in
            switch true {
            case key == "originalTransactionId": parser.read(&originalTransactionID, nullable: true) { $0.string() }
            case key == "group": parser.read(&group) { $0.string() }
            case key == "productId": parser.read(&productID, nullable: true) { $0.string() }
            case key == "expiresDate": parser.read(&expiresDate) { $0.date() }
            case key == "reason": parser.read(&reason, nullable: true) { $0.string() }
            case key == "environment": parser.read(&environment) { $0.rawValue() }
            case key == "source": parser.read(&source) { $0.string() }
            default: false
            }
        }
        guard read, let group = group.value, let expiresDate = expiresDate.value, let environment = environment.value,
              let source = source.value
        else { return nil }
        return ExpiryFact(originalTransactionID: originalTransactionID.value, group: group, productID: productID.value,
                          expiresDate: expiresDate, reason: reason.value, environment: environment, source: source)
    }

    mutating func autoRenewChange() -> AutoRenewChange? {
        var originalTransactionID = Field<String>(), productID = Field<String>(), autoRenew = Field<Bool>()
        var effectiveDate = Field<Date>(), environment = Field<Environment>(), source = Field<String>()
        let read = members { parser, key in
            switch true {
            case key == "originalTransactionId": parser.read(&originalTransactionID) { $0.string() }
            case key == "productId": parser.read(&productID, nullable: true) { $0.string() }
            case key == "autoRenew": parser.read(&autoRenew) { $0.boolean() }
            case key == "effectiveDate": parser.read(&effectiveDate) { $0.date() }
            case key == "environment": parser.read(&environment) { $0.rawValue() }
            case key == "source": parser.read(&source) { $0.string() }
            default: false
            }
        }
        guard read, let originalTransactionID = originalTransactionID.value, let autoRenew = autoRenew.value,
              let effectiveDate = effectiveDate.value, let environment = environment.value, let source = source.value
        else { return nil }
        return AutoRenewChange(originalTransactionID: originalTransactionID, productID: productID.value, autoRenew: autoRenew,
                               effectiveDate: effectiveDate, environment: environment, source: source)
    }

    mutating func billingIssue() -> BillingIssue? {
        var originalTransactionID = Field<String>(), productID = Field<String>(), effectiveDate = Field<Date>()
        var gracePeriodExpiresDate = Field<Date>(), environment = Field<Environment>(), source = Field<String>()
        let read = members { parser, key in
            switch true {
            case key == "originalTransactionId": parser.read(&originalTransactionID) { $0.string() }
            case key == "productId": parser.read(&productID, nullable: true) { $0.string() }
            case key == "effectiveDate": parser.read(&effectiveDate) { $0.date() }
            case key == "gracePeriodExpiresDate": parser.read(&gracePeriodExpiresDate, nullable: true) { $0.date() }
            case key == "environment": parser.read(&environment) { $0.rawValue() }
            case key == "source": parser.read(&source) { $0.string() }
            default: false
            }
        }
        guard read, let originalTransactionID = originalTransactionID.value, let effectiveDate = effectiveDate.value,
              let environment = environment.value, let source = source.value
        else { return nil }
        return BillingIssue(originalTransactionID: originalTransactionID, productID: productID.value, effectiveDate: effectiveDate,
                            gracePeriodExpiresDate: gracePeriodExpiresDate.value, environment: environment, source: source)
    }

    mutating func transferFact() -> TransferFact? {
        var originalTransactionID = Field<String>(), fromSubscriberID = Field<String>(), toSubscriberID = Field<String>()
        var afterPosition = Field<Int>(), date = Field<Date>(), transaction = Field<TransactionFact>(), source = Field<String>()
        var environment = Field<Environment>()
        let read = members { parser, key in
            switch true {
            case key == "originalTransactionId": parser.read(&originalTransactionID) { $0.string() }
            case key == "fromSubscriberId": parser.read(&fromSubscriberID) { $0.string() }
            case key == "toSubscriberId": parser.read(&toSubscriberID) { $0.string() }
            case key == "afterPosition": parser.read(&afterPosition) { $0.integer() }
            case key == "date": parser.read(&date) { $0.date() }
            case key == "transaction": parser.read(&transaction, nullable: true) { $0.transactionFact() }
            case key == "source": parser.read(&source) { $0.string() }
            case key == "environment": parser.read(&environment, nullable: true) { $0.rawValue() }
            default: false
            }
        }
        guard read, let originalTransactionID = originalTransactionID.value, let fromSubscriberID = fromSubscriberID.value,
              let toSubscriberID = toSubscriberID.value, let afterPosition = afterPosition.value, let date = date.value,
              let source = source.value
        else { return nil }
        return TransferFact(originalTransactionID: originalTransactionID, fromSubscriberID: fromSubscriberID,
                            toSubscriberID: toSubscriberID, afterPosition: Int64(afterPosition), date: date,
                            transaction: transaction.value, source: source, environment: environment.value)
    }

    mutating func deviceSeen() -> DeviceSeen? {
        var deviceID = Field<String>(), date = Field<Date>(), source = Field<String>()
        let read = members { parser, key in
            switch true {
            case key == "deviceId": parser.read(&deviceID) { $0.string() }
            case key == "date": parser.read(&date) { $0.date() }
            case key == "source": parser.read(&source) { $0.string() }
            default: false
            }
        }
        guard read, let deviceID = deviceID.value, let date = date.value, let source = source.value else { return nil }
        return DeviceSeen(deviceID: deviceID, date: date, source: source)
    }

    mutating func reminderDelivery() -> ReminderDelivery? {
        var reminderID = Field<String>(), type = Field<ReminderType>(), group = Field<String>(), productID = Field<String>()
        var expiresAt = Field<Date>(), lead = Field<ISODuration>(), dueAt = Field<Date>(), date = Field<Date>()
        var attempt = Field<Int>(), error = Field<String>(), source = Field<String>()
        let read = members { parser, key in
            switch true {
            case key == "reminderId": parser.read(&reminderID) { $0.string() }
            case key == "type": parser.read(&type) { $0.rawValue() }
            case key == "group": parser.read(&group) { $0.string() }
            case key == "productId": parser.read(&productID) { $0.string() }
            case key == "expiresAt": parser.read(&expiresAt) { $0.date() }
            case key == "lead": parser.read(&lead) { $0.duration() }
            case key == "dueAt": parser.read(&dueAt) { $0.date() }
            case key == "date": parser.read(&date) { $0.date() }
            case key == "attempt": parser.read(&attempt) { $0.integer() }
            case key == "error": parser.read(&error, nullable: true) { $0.string() }
            case key == "source": parser.read(&source) { $0.string() }
            default: false
            }
        }
        guard read, let reminderID = reminderID.value, let type = type.value, let group = group.value,
              let productID = productID.value, let expiresAt = expiresAt.value, let lead = lead.value, let dueAt = dueAt.value,
              let date = date.value, let attempt = attempt.value, let source = source.value
        else { return nil }
        return ReminderDelivery(reminderID: reminderID, type: type, group: group, productID: productID, expiresAt: expiresAt,
                                lead: lead, dueAt: dueAt, date: date, attempt: attempt, error: error.value, source: source)
    }

    mutating func actorStamp() -> ActorStamp? {
        var role = Field<String>(), keyFingerprint = Field<String>(), actor = Field<String>()
        let read = members { parser, key in
            switch true {
            case key == "role": parser.read(&role) { $0.string() }
            case key == "keyFingerprint": parser.read(&keyFingerprint) { $0.string() }
            case key == "actor": parser.read(&actor, nullable: true) { $0.string() }
            default: false
            }
        }
        guard read, let role = role.value, let keyFingerprint = keyFingerprint.value else { return nil }
        return ActorStamp(role: role, keyFingerprint: keyFingerprint, actor: actor.value)
    }

    mutating func supportGrant() -> SupportGrant? {
        var grantID = Field<String>(), entitlement = Field<String>(), startsAt = Field<Date>(), endsAt = Field<Date>()
        var reason = Field<String>(), grantedBy = Field<ActorStamp>(), source = Field<String>()
        let read = members { parser, key in
            switch true {
            case key == "grantId": parser.read(&grantID) { $0.string() }
            case key == "entitlement": parser.read(&entitlement) { $0.string() }
            case key == "startsAt": parser.read(&startsAt) { $0.date() }
            case key == "endsAt": parser.read(&endsAt) { $0.date() }
            case key == "reason": parser.read(&reason) { $0.string() }
            case key == "grantedBy": parser.read(&grantedBy) { $0.actorStamp() }
            case key == "source": parser.read(&source) { $0.string() }
            default: false
            }
        }
        guard read, let grantID = grantID.value, let entitlement = entitlement.value, let startsAt = startsAt.value,
              let endsAt = endsAt.value, let reason = reason.value, let grantedBy = grantedBy.value, let source = source.value
        else { return nil }
        return SupportGrant(grantID: grantID, entitlement: entitlement, startsAt: startsAt, endsAt: endsAt, reason: reason,
                            grantedBy: grantedBy, source: source)
    }

    mutating func subscriberErasure() -> SubscriberErasure? {
        var date = Field<Date>(), reason = Field<String>(), erasedBy = Field<ActorStamp>(), source = Field<String>()
        let read = members { parser, key in
            switch true {
            case key == "date": parser.read(&date) { $0.date() }
            case key == "reason": parser.read(&reason) { $0.string() }
            case key == "erasedBy": parser.read(&erasedBy) { $0.actorStamp() }
            case key == "source": parser.read(&source) { $0.string() }
            default: false
            }
        }
        guard read, let date = date.value, let reason = reason.value, let erasedBy = erasedBy.value, let source = source.value
        else { return nil }
        return SubscriberErasure(date: date, reason: reason, erasedBy: erasedBy, source: source)
    }

    mutating func grantRevocation() -> GrantRevocation? {
        var grantID = Field<String>(), date = Field<Date>(), reason = Field<String>(), revokedBy = Field<ActorStamp>()
        var source = Field<String>()
        let read = members { parser, key in
            switch true {
            case key == "grantId": parser.read(&grantID) { $0.string() }
            case key == "date": parser.read(&date) { $0.date() }
            case key == "reason": parser.read(&reason, nullable: true) { $0.string() }
            case key == "revokedBy": parser.read(&revokedBy) { $0.actorStamp() }
            case key == "source": parser.read(&source) { $0.string() }
            default: false
            }
        }
        guard read, let grantID = grantID.value, let date = date.value, let revokedBy = revokedBy.value, let source = source.value
        else { return nil }
        return GrantRevocation(grantID: grantID, date: date, reason: reason.value, revokedBy: revokedBy, source: source)
    }
}
