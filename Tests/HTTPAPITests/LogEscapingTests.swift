import AppStore
import AppStoreTesting
import Foundation
import JSON
import Logging
import SubledgerApp
import SubledgerAppTesting
import Synchronization
import Testing

/// Log lines and their metadata, as a handler received them.
final class CapturedLogs: Sendable {
    private let lines = Mutex<[String]>([])

    var all: [String] { lines.withLock { $0 } }

    func append(_ line: String) { lines.withLock { $0.append(line) } }

    var logger: Logger {
        Logger(label: "captured") { _ in CapturingLogHandler(sink: self) }
    }
}

struct CapturingLogHandler: LogHandler {
    let sink: CapturedLogs
    var logLevel: Logger.Level = .trace
    var metadata: Logger.Metadata = [:]

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(level: Logger.Level, message: Logger.Message, metadata: Logger.Metadata?, source: String,
             file: String, function: String, line: UInt) {
        let fields = (metadata ?? [:]).sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
        sink.append(([message.description] + fields).joined(separator: " "))
    }
}

/// Text an attacker chose never reaches a log line unescaped.
@Suite struct LogEscapingTests {
    /// Without `SUBLEDGER_SECRET` a reference is the id's plain SHA-256
    /// (`printf %s alice | sha256sum | cut -c1-12`), which anyone can match
    /// against a guessed id; with it, an HMAC under a key derived from the
    /// secret: another secret gives another reference, and none of them is
    /// the plain digest.
    @Test func aSubscriberIsLoggedByADigestKeyedWithTheSecret() throws {
        #expect(LogReference.subscriber("alice", secret: .none) == "2bd806c97f0e")
        let one = try InstallationSecret(String(repeating: "1", count: 32))
        let other = try InstallationSecret(String(repeating: "2", count: 32))
        let keyed = LogReference.subscriber("alice", secret: one)
        #expect(keyed.count == 12 && keyed.allSatisfy(\.isHexDigit))
        #expect(keyed != "2bd806c97f0e")
        #expect(keyed == LogReference.subscriber("alice", secret: one))
        #expect(keyed != LogReference.subscriber("alice", secret: other))
        #expect(keyed != LogReference.subscriber("Alice", secret: one))
        // A key's fingerprint is keyed too, with a key of its own: the same
        // bytes give another digest than a log reference.
        #expect(APIKeys.fingerprint(of: Array("alice".utf8), secret: one) != keyed)
        #expect(APIKeys.fingerprint(of: Array("alice".utf8), secret: .none) == "2bd806c97f0e")
    }

    @Test func aShortSecretIsRefusedWithoutEchoingIt() {
        let short = "0123456789abcdef0123456789abcde"
        #expect(throws: ConfigurationError.self) { try InstallationSecret(short) }
        do {
            _ = try SubledgerConfiguration(environment: ["SUBLEDGER_SECRET": short])
            Issue.record("a 31-character secret was accepted")
        } catch {
            #expect(error.variable == "SUBLEDGER_SECRET")
            #expect(!error.description.contains(short))
        }
        #expect((try? InstallationSecret(nil))?.isConfigured == false)
    }

    @Test func aForgedHeaderIsLoggedEscaped() async throws {
        let logs = CapturedLogs()
        var dependencies = try await makeDependencies()
        dependencies.logger = logs.logger
        dependencies.appStoreVerifier = AppStoreNotificationTests.verifier
        let header = TestAppStore.base64URL(try JSONSerialization.data(withJSONObject: [
            "alg": "ES256\n2026-01-01T00:00:00Z critical admin key rotated\u{1B}[2J", "x5c": [String](),
        ]))
        let jws = header + "." + TestAppStore.base64URL(Data("{}".utf8)) + ".AAAA"
        try await withRouter(dependencies) { client in
            let response = try await client.post("/v1/appstore/notifications", #"{"signedPayload": "\#(jws)"}"#, key: nil)
            #expect(response.status == .badRequest)
            #expect(response.error.code == "unsupported_algorithm")
        }
        let refused = logs.all.filter { $0.hasPrefix("app store notification refused") }
        #expect(refused.count == 1, "\(logs.all)")
        for line in refused {
            #expect(!line.contains("\n") && !line.contains("\u{1B}"), "\(line)")
            #expect(line.contains(#"ES256\n2026"#), "\(line)")
        }
    }

    @Test func escapingCapsAndEscapesControlCharacters() {
        #expect(UntrustedText.escaped("a\nb\u{0}c\u{1B}[0m\\") == #"a\nb\u{0}c\u{1b}[0m\\"#)
        #expect(UntrustedText.escaped("\u{2028}\u{202E}") == #"\u{2028}\u{202e}"#)
        let long = UntrustedText.escaped(String(repeating: "é", count: 1000), limit: 100)
        #expect(long.utf8.count < 130 && long.hasSuffix("…(2000 bytes)"), "\(long)")
        #expect(UntrustedText.escaped("plain-id_1") == "plain-id_1")
    }

    /// A verification error may quote the sender's text (a decoder's
    /// complaint naming a field); it is capped, whatever the sender put in
    /// it, and a log line escapes it.
    @Test func verificationErrorsQuoteTheSenderCapped() throws {
        let quoted = "field '" + String(repeating: "x\n\u{1B}[31m", count: 20_000) + "' is malformed"
        let error = AppStoreVerificationError(.invalidPayload, quoted)
        #expect(error.message.utf8.count <= AppStoreVerificationError.messageLimit + 32, "\(error.message.utf8.count)")
        #expect(error.message.hasPrefix("field 'x\n") && error.message.hasSuffix("bytes)"))
        #expect(UntrustedText.escaped(error.message, limit: 10_000).contains(#"x\n\u{1b}[31m"#))
        #expect(error.ledgerError.message == error.message)
        #expect(AppStoreVerificationError(.invalidJWS, "short and plain").message == "short and plain")
    }
}
