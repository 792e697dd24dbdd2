import AppStoreTesting
import AppStore
import Foundation
import Testing

/// The notification route needs no key: a chain validated once is not
/// validated again, and a forged signature over a known chain is refused
/// with one signature check.
@Suite struct ChainCacheTests {
    let store: TestAppStore

    init() throws { store = try TestAppStore() }

    @Test func aKnownChainIsNotValidatedAgainAndAForgedSignatureIsRefusedFromTheCache() async throws {
        let verifier = store.verifier
        let signed = try store.signedNotification(.subscribed, .initialBuy, transaction: TestAppStore.subscription(),
                                                  renewal: TestAppStore.renewalInfo())
        _ = try await verifier.verifyNotification(signedPayload: signed)
        // Three payloads, one chain: validated for the first, known after.
        #expect(verifier.verifiedChains.statistics == (hits: 2, validations: 1))

        var parts = signed.split(separator: ".").map(String.init)
        parts[2] = TestAppStore.base64URL(Data(repeating: 7, count: 64))
        await #expect(throws: AppStoreVerificationError.self) {
            try await verifier.verifyNotification(signedPayload: parts.joined(separator: "."))
        }
        #expect(verifier.verifiedChains.statistics == (hits: 3, validations: 1))
        do {
            _ = try await verifier.verifyNotification(signedPayload: parts.joined(separator: "."))
        } catch {
            #expect(error.code == .invalidSignature)
        }
    }

    @Test func aKnownChainOutsideItsValidityIsJudgedInFull() async throws {
        let verifier = store.verifier
        _ = try await verifier.verifyNotification(signedPayload: try store.signedNotification(.subscribed, .initialBuy))
        // The test leaf is valid from 2020 to 2040.
        let late = try store.signedNotification(.subscribed, .initialBuy, signedDate: TestAppStore.date("2041-01-01T00:00:00Z"))
        do {
            _ = try await verifier.verifyNotification(signedPayload: late)
            Issue.record("a payload signed after the leaf expired was accepted")
        } catch {
            #expect(error.code == .certificateExpired)
        }
    }

    @Test func theCacheIsBounded() async throws {
        let stores = try (0..<3).map { _ in try TestAppStore() }
        var verifier = AppStoreVerifier(rootCertificates: stores.map(\.root.certificate), bundleID: TestAppStore.bundleID)
        verifier.verifiedChains = VerifiedChainCache(capacity: 2)
        for other in stores {
            _ = try await verifier.verifyNotification(signedPayload: try other.signedNotification(.subscribed, .initialBuy))
        }
        #expect(verifier.verifiedChains.count <= 2)
        #expect(verifier.verifiedChains.statistics.validations == 3)
    }
}
