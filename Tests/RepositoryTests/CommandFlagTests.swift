import ArgumentParser
import Foundation
import SubledgerApp
import Testing
@testable import subledger

/// docs/configuration.md lists each command's own flags, exactly those its
/// `--help` shows beside the configuration's.
@Suite struct CommandFlagTests {
    /// Every command that runs, with its path (`appstore reconcile`).
    static func commands(_ command: any ParsableCommand.Type = Subledger.self, path: [String] = []) -> [(String, any ParsableCommand.Type)] {
        let subcommands = command.configuration.subcommands
        guard !subcommands.isEmpty else { return [(path.joined(separator: " "), command)] }
        return subcommands.flatMap { commands($0, path: path + [$0._commandName]) }
    }

    /// The flags each `### \`subledger …\`` section of docs/configuration.md lists.
    static func documented() throws -> [String: Set<String>] {
        var sections: [String: Set<String>] = [:]
        var current: String?
        for line in try Repository.read("docs/configuration.md").split(separator: "\n") {
            if line.hasPrefix("### `subledger ") {
                current = String(line.dropFirst("### `subledger ".count).prefix { $0 != "`" })
                sections[current!] = []
            } else if line.hasPrefix("## ") {
                current = nil
            } else if let section = current, line.hasPrefix("| `--") {
                sections[section]!.insert(String(line.dropFirst(3).prefix { $0 != "`" }))
            }
        }
        return sections
    }

    @Test func eachCommandsOwnFlagsAreDocumented() throws {
        let configurationFlags = Set(ConfigurationVariable.all.map { "--\($0.flag)" })
        let documented = try Self.documented()
        let flag = try NSRegularExpression(pattern: #"(?<![\w-])--[a-z][a-z0-9-]*"#)
        var seen = Set<String>()
        for (name, command) in Self.commands() {
            let help = Subledger.helpMessage(for: command, columns: 10_000)
            let own = Set(flag.matches(in: help, range: NSRange(help.startIndex..., in: help))
                .map { String(help[Range($0.range, in: help)!]) })
                .subtracting(configurationFlags).subtracting(["--help", "--version"])
            #expect(own == documented[name] ?? [], "subledger \(name): --help shows \(own.sorted()), docs/configuration.md lists \((documented[name] ?? []).sorted())")
            seen.insert(name)
        }
        #expect(Set(documented.keys).subtracting(seen).sorted() == [], "docs/configuration.md documents commands that do not exist")
        #expect(seen.count >= 10)
    }
}
