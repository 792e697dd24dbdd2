import ArgumentParser
import Foundation
import SubledgerApp
import Testing
import CommandSupport
@testable import subledger

/// Every configuration variable is declared once (`ConfigurationVariable`),
/// has its flag, and is documented in docs/configuration.md with that flag
/// and default; the sources name no variable that is not declared.
@Suite struct ConfigurationDocumentationTests {
    /// The rows of docs/configuration.md's table: variable, flag, default.
    static func documentedRows() throws -> [(name: String, flag: String, defaultValue: String?)] {
        try Repository.read("docs/configuration.md").split(separator: "\n").compactMap { line in
            let cells = line.split(separator: "|", omittingEmptySubsequences: false)
                .map { $0.trimmingCharacters(in: .whitespaces) }
            guard cells.count >= 5, cells[1].hasPrefix("`"), cells[2].hasPrefix("`--") else { return nil }
            let unquoted = { (cell: String) in cell.trimmingCharacters(in: CharacterSet(charactersIn: "`")) }
            return (unquoted(cells[1]), String(unquoted(cells[2]).dropFirst(2)), cells[3] == "–" ? nil : unquoted(cells[3]))
        }
    }

    @Test func theDocumentedVariablesAreTheDeclaredOnes() throws {
        let rows = try Self.documentedRows()
        let documented = rows.map(\.name)
        let declared = ConfigurationVariable.all.map(\.name)
        #expect(Set(documented).count == documented.count, "a variable is documented twice")
        #expect(Set(declared).count == declared.count, "a variable is declared twice")
        #expect(Set(documented).subtracting(declared).sorted() == [], "documented but not declared in ConfigurationVariable")
        #expect(Set(declared).subtracting(documented).sorted() == [], "declared but missing from docs/configuration.md")
        for variable in ConfigurationVariable.all {
            guard let row = rows.first(where: { $0.name == variable.name }) else { continue }
            #expect(row.flag == variable.flag, "\(variable.name): the docs say --\(row.flag), the code --\(variable.flag)")
            #expect(row.defaultValue == variable.defaultValue,
                    "\(variable.name): the docs say \(row.defaultValue ?? "none"), the code \(variable.defaultValue ?? "none")")
        }
    }

    @Test func theSourcesNameOnlyDeclaredVariables() throws {
        let declared = Set(ConfigurationVariable.all.map(\.name))
        var named: [String: String] = [:]
        let pattern = try NSRegularExpression(pattern: #"\bSUBLEDGER_[A-Z0-9_]*[A-Z0-9]\b"#)
        // What runs the service; the test scripts' own knobs (scripts/api-fuzz's
        // SUBLEDGER_FUZZ_EXAMPLES) configure the tests, not the service.
        let places = Repository.files(under: "Sources", endingIn: ".swift") + ["scripts/run", "Dockerfile", "docker-compose.yml"]
        for path in places {
            let text = try Repository.read(path)
            for match in pattern.matches(in: text, range: NSRange(text.startIndex..., in: text)) {
                named[String(text[Range(match.range, in: text)!]), default: path] = path
            }
        }
        let undeclared = named.filter { !declared.contains($0.key) }.map { "\($0.key) (\($0.value))" }.sorted()
        #expect(undeclared == [], "named in the sources but not declared in ConfigurationVariable")
    }

    @Test func everyVariableHasItsFlag() throws {
        let listed = try ConfigurationOptions.parse([]).flags.map(\.0.name)
        #expect(listed.sorted() == ConfigurationVariable.all.map(\.name).sorted(), "ConfigurationOptions.flags and ConfigurationVariable.all differ")
        for variable in ConfigurationVariable.all {
            let options = try ConfigurationOptions.parse(["--\(variable.flag)", "value-of-\(variable.flag)"])
            let given = options.flags.first { $0.0 == variable }?.1
            #expect(given == "value-of-\(variable.flag)", "--\(variable.flag) does not set \(variable.name)")
        }
    }

    @Test func theDefaultsParse() throws {
        let configuration = try SubledgerConfiguration(environment: [:])
        #expect(configuration.port == 8080)
        #expect(configuration.maximumBodySize == 1 << 20)
        #expect(configuration.expirySweepInterval == .seconds(30))
        #expect(configuration.appStoreReconcileInterval == .seconds(3600))
        #expect(configuration.sessionTimeouts.statementTimeout == .seconds(30))
    }
}
