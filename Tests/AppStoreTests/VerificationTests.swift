import AppStoreTesting
import AppStore
import Foundation
import Testing
import X509

/// Runs `body` and returns the verification error code it threw (nil: none).
private func rejection(_ body: () async throws -> Void) async -> AppStoreVerificationError? {
    do {
        try await body()
        return nil
    } catch let error as AppStoreVerificationError {
        return error
    } catch {
        Issue.record("unexpected error \(error)")
        return nil
    }
}

/// Replaces one of the three parts of a compact JWS.
private func replacingPart(_ index: Int, of jws: String, with part: String) -> String {
    var parts = jws.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
    parts[index] = part
    return parts.joined(separator: ".")
}

@Suite struct VerificationTests {
    let store: TestAppStore

    init() throws { store = try TestAppStore() }

    @Test func acceptsAGoodNotificationWithItsNestedData() async throws {
        let signed = try store.signedNotification(.subscribed, .initialBuy, transaction: TestAppStore.subscription(),
                                                  renewal: TestAppStore.renewalInfo(), uuid: "b1f6c5a2-0000-4000-8000-000000000001")
        let verified = try await store.verifier.verifyNotification(body: store.body(signedPayload: signed))
        #expect(verified.payload.notificationType == .subscribed)
        #expect(verified.payload.subtype == .initialBuy)
        #expect(verified.payload.notificationUUID == "b1f6c5a2-0000-4000-8000-000000000001")
        #expect(verified.payload.signedDate == TestAppStore.signedDate)
        #expect(verified.payload.data?.bundleID == TestAppStore.bundleID)
        #expect(verified.payload.data?.environment == .sandbox)
        #expect(verified.transaction == TestAppStore.subscription())
        #expect(verified.renewalInfo == TestAppStore.renewalInfo())
    }

    @Test func decodesApplesIntegerMillisecondDates() async throws {
        let json = #"{"notificationType":"TEST","notificationUUID":"u-1","signedDate":1740830400123,"version":"2.0","data":{"bundleId":"com.example.subledger","environment":"Production","appAppleId":1234}}"#
        let payload = try await store.verifier.verifyNotification(signedPayload: store.sign(payload: Data(json.utf8))).payload
        #expect(payload.signedDate == Date(timeIntervalSince1970: 1_740_830_400.123))
        #expect(payload.data?.environment == .production)
    }

    // MARK: - Rejections

    @Test func rejectsATamperedPayload() async throws {
        let signed = try store.signedNotification(.didRenew, transaction: TestAppStore.subscription())
        var payload = try JSONSerialization.jsonObject(with: TestAppStore.decodeBase64URL(signed.split(separator: ".")[1])) as! [String: Any]
        payload["notificationType"] = "REFUND"
        let tampered = replacingPart(1, of: signed, with: TestAppStore.base64URL(try JSONSerialization.data(withJSONObject: payload)))
        let error = await rejection { _ = try await store.verifier.verifyNotification(signedPayload: tampered) }
        #expect(error?.code == .invalidSignature)
        #expect(error?.field == "signedPayload")
    }

    @Test func rejectsATamperedNestedTransaction() async throws {
        let signedTransaction = try store.sign(TestAppStore.subscription())
        var transaction = TestAppStore.subscription()
        transaction.expiresDate = TestAppStore.date("2035-01-01T00:00:00Z")
        let tampered = replacingPart(1, of: signedTransaction, with: TestAppStore.base64URL(try TestAppStore.encoder.encode(transaction)))
        let payload = NotificationPayload(
            notificationType: .didRenew, notificationUUID: "u-2", signedDate: TestAppStore.signedDate,
            data: NotificationData(bundleID: TestAppStore.bundleID, environment: .sandbox, signedTransactionInfo: tampered))
        let error = await rejection { _ = try await store.verifier.verifyNotification(signedPayload: store.sign(payload)) }
        #expect(error?.code == .invalidSignature)
        #expect(error?.field == "data.signedTransactionInfo")
    }

    @Test func rejectsAChainToAnUnknownRoot() async throws {
        let impostor = try TestAppStore(.init(rootName: "Test Apple Root CA - G3"))
        let signed = try impostor.signedNotification(.test)
        let error = await rejection { _ = try await store.verifier.verifyNotification(signedPayload: signed) }
        #expect(error?.code == .untrustedRoot)
    }

    @Test func rejectsTwoCertificatesInX5C() async throws {
        let payload = try TestAppStore.encoder.encode(NotificationPayload(notificationType: .test, notificationUUID: "u-3",
                                                                          signedDate: TestAppStore.signedDate,
                                                                          data: NotificationData(bundleID: TestAppStore.bundleID, environment: .sandbox)))
        let signed = try store.sign(payload: payload, header: ["alg": "ES256", "x5c": Array(store.x5c.prefix(2))])
        let error = await rejection { _ = try await store.verifier.verifyNotification(signedPayload: signed) }
        #expect(error?.code == .invalidCertificateChain)
    }

    @Test(arguments: ["none", "HS256", "RS256", "ES384"])
    func rejectsOtherAlgorithms(_ algorithm: String) async throws {
        let signed = try store.signedNotification(.test)
        var header = ["alg": algorithm] as [String: Any]
        header["x5c"] = try store.x5c
        let headerPart = TestAppStore.base64URL(try JSONSerialization.data(withJSONObject: header))
        var forged = replacingPart(0, of: signed, with: headerPart)
        if algorithm == "none" { forged = replacingPart(2, of: forged, with: "") }
        let error = await rejection { _ = try await store.verifier.verifyNotification(signedPayload: forged) }
        #expect(error?.code == .unsupportedAlgorithm)
    }

    @Test func rejectsALeafWithoutAppleMarker() async throws {
        let unmarked = try TestAppStore(.init(leafHasMarker: false))
        let error = await rejection { _ = try await unmarked.verifier.verifyNotification(signedPayload: unmarked.signedNotification(.test)) }
        #expect(error?.code == .missingAppleOID)
        #expect(error?.message.contains("leaf") == true)
    }

    @Test func rejectsAnIntermediateWithoutAppleMarker() async throws {
        let unmarked = try TestAppStore(.init(intermediateHasMarker: false))
        let error = await rejection { _ = try await unmarked.verifier.verifyNotification(signedPayload: unmarked.signedNotification(.test)) }
        #expect(error?.code == .missingAppleOID)
        #expect(error?.message.contains("intermediate") == true)
    }

    @Test func rejectsAnotherAppsNotification() async throws {
        let signed = try store.signedNotification(.test, bundleID: "com.example.other")
        let error = await rejection { _ = try await store.verifier.verifyNotification(signedPayload: signed) }
        #expect(error?.code == .bundleIDMismatch)
        #expect(error?.message.contains("com.example.other") == true)
    }

    @Test func rejectsAnotherAppsNestedTransaction() async throws {
        let signed = try store.signedNotification(.didRenew, transaction: TestAppStore.subscription(bundleID: "com.example.other"))
        let error = await rejection { _ = try await store.verifier.verifyNotification(signedPayload: signed) }
        #expect(error?.code == .bundleIDMismatch)
        #expect(error?.field == "data.signedTransactionInfo")
    }

    @Test func rejectsALeafExpiredAtSignedDateThoughValidNow() async throws {
        let now = Date()
        let renewed = try TestAppStore(.init(leafValidity: now.addingTimeInterval(-86_400)...now.addingTimeInterval(365 * 86_400)))
        let signed = try renewed.signedNotification(.test, signedDate: now.addingTimeInterval(-30 * 86_400))
        let error = await rejection { _ = try await renewed.verifier.verifyNotification(signedPayload: signed) }
        #expect(error?.code == .certificateExpired)
        #expect(error?.message.contains("leaf") == true)
    }

    @Test func acceptsALeafValidAtSignedDateThoughExpiredNow() async throws {
        let now = Date()
        let expired = try TestAppStore(.init(leafValidity: now.addingTimeInterval(-365 * 86_400)...now.addingTimeInterval(-86_400)))
        let signedDate = now.addingTimeInterval(-30 * 86_400)
        let signed = try expired.signedNotification(.test, signedDate: signedDate)
        let verified = try await expired.verifier.verifyNotification(signedPayload: signed)
        #expect(abs(verified.payload.signedDate.timeIntervalSince(signedDate)) < 0.001)
    }

    @Test func rejectsALeafSignedByTheRootPastTheIntermediate() async throws {
        let shortcut = try TestAppStore(.init(leafIssuedByRoot: true))
        let error = await rejection { _ = try await shortcut.verifier.verifyNotification(signedPayload: shortcut.signedNotification(.test)) }
        #expect(error?.code == .invalidCertificateChain)
    }

    @Test func rejectsAnIntermediateTheRootDidNotSign() async throws {
        // Same names, other keys: only the signatures along the chain tell them apart.
        let other = try TestAppStore()
        let payload = try TestAppStore.encoder.encode(NotificationPayload(notificationType: .test, notificationUUID: "u-4",
                                                                          signedDate: TestAppStore.signedDate,
                                                                          data: NotificationData(bundleID: TestAppStore.bundleID, environment: .sandbox)))
        let x5c = try [other.leaf, other.intermediate, store.root].map { try TestAppStore.der($0.certificate).base64EncodedString() }
        let headerPart = TestAppStore.base64URL(try JSONSerialization.data(withJSONObject: ["alg": "ES256", "x5c": x5c]))
        let input = headerPart + "." + TestAppStore.base64URL(payload)
        let signed = input + "." + TestAppStore.base64URL(try other.leaf.key.signature(for: Data(input.utf8)).rawRepresentation)
        let error = await rejection { _ = try await store.verifier.verifyNotification(signedPayload: signed) }
        #expect(error?.code == .invalidCertificateChain)
    }

    @Test(arguments: [
        ("not json", "invalid_body"),
        (#"{"signedPayload": 3}"#, "invalid_body"),
        (#"{"signedPayload": "a.b"}"#, "invalid_jws"),
        (#"{"signedPayload": "a.b.c!"}"#, "invalid_jws"),
        (#"{"signedPayload": "e30.e30.AA"}"#, "unsupported_algorithm"),
    ])
    func rejectsMalformedBodies(_ body: String, _ code: String) async throws {
        let error = await rejection { _ = try await store.verifier.verifyNotification(body: Data(body.utf8)) }
        #expect(error?.code.rawValue == code)
        #expect(error?.ledgerError.kind == .badRequest)
    }

    @Test func rejectsAPayloadThatIsNotApplesFormat() async throws {
        let signed = try store.sign(payload: Data(#"{"signedDate": 1740830400000, "notificationType": 7}"#.utf8))
        let error = await rejection { _ = try await store.verifier.verifyNotification(signedPayload: signed) }
        #expect(error?.code == .invalidPayload)
        #expect(error?.ledgerError.kind == .badRequest)
    }
}

@Suite struct RootCertificateLoadingTests {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("appstore-roots-\(UUID().uuidString)")

    @Test func loadsDERAndMultiCertificatePEMFiles() throws {
        let first = try TestAppStore(), second = try TestAppStore()
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let der = directory.appendingPathComponent("AppleRootCA-G3.cer")
        try TestAppStore.der(first.root.certificate).write(to: der)
        let pem = directory.appendingPathComponent("roots.pem")
        let pemText = try [second.root, second.intermediate].map { try $0.certificate.serializeAsPEM().pemString }.joined(separator: "\n")
        try Data(pemText.utf8).write(to: pem)

        let roots = try AppStoreVerifier.loadRootCertificates(paths: "\(der.path), \(pem.path)")
        #expect(roots == [first.root.certificate, second.root.certificate, second.intermediate.certificate])
    }

    @Test func namesTheFileThatFailed() throws {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let garbage = directory.appendingPathComponent("garbage.cer")
        try Data("not a certificate".utf8).write(to: garbage)
        let missing = directory.appendingPathComponent("missing.cer").path

        #expect(throws: AppStoreConfigurationError.self) { try AppStoreVerifier.loadRootCertificates(paths: missing) }
        do {
            _ = try AppStoreVerifier.loadRootCertificates(paths: garbage.path)
            Issue.record("garbage loaded")
        } catch {
            #expect(error.path == garbage.path)
            #expect(error.description.contains("garbage.cer"))
        }
        do {
            _ = try AppStoreVerifier.loadRootCertificates(paths: " , ")
            Issue.record("empty list loaded")
        } catch {
            #expect(error.description.contains("SUBLEDGER_APPSTORE_ROOT_CERTS"))
        }
    }
}
