import CLibPQ

// Bulk loads through COPY ... FROM STDIN: a rebuild writes hundreds of
// thousands of rows, which the server reads far more cheaply as COPY text
// than as one parameter it must parse as JSON and then cast.
extension Connection {
    /// Runs `sql`, a `COPY table (columns) FROM STDIN` statement the program
    /// wrote (no parameters: the values travel as the copy data), and sends
    /// `rows` — text-format rows (`CopyTextRows`) — as its input. Returns the
    /// number of rows copied. Runs in the caller's transaction, if any; an
    /// error in the data aborts the whole COPY.
    @discardableResult
    public func copy(unsafeSQL sql: String, rows: CopyTextRows) async throws -> Int {
        try await copy(unsafeSQL: sql, data: rows.bytes)
    }

    /// The same for rows in the binary format (`CopyBinaryRows`); `sql` says
    /// `WITH (FORMAT binary)`.
    @discardableResult
    public func copy(unsafeSQL sql: String, rows: CopyBinaryRows) async throws -> Int {
        try await copy(unsafeSQL: sql, data: rows.finished)
    }

    private func copy(unsafeSQL sql: String, data: [UInt8]) async throws -> Int {
        return try await run { handle throws(PostgresError) in try Connection.copy(sql, data: data, on: handle) }
    }

    private static func copy(_ sql: String, data: [UInt8], on handle: OpaquePointer) throws(PostgresError) -> Int {
        guard let started = PQexec(handle, sql) else {
            throw PostgresError(code: PQstatus(handle) == CONNECTION_OK ? .server : .connectionLost,
                                message: errorMessage(handle), query: sql)
        }
        guard PQresultStatus(started) == PGRES_COPY_IN else {
            let error = serverError(started, handle: handle, sql: sql)
            PQclear(started)
            while let result = PQgetResult(handle) { PQclear(result) }
            throw error
        }
        PQclear(started)
        // In pieces: libpq buffers each piece whole before sending it.
        let sent = data.withUnsafeBytes { raw -> Bool in
            var offset = 0
            while offset < raw.count {
                let length = min(1 << 20, raw.count - offset)
                guard PQputCopyData(handle, raw.baseAddress! + offset, Int32(length)) == 1 else { return false }
                offset += length
            }
            return true
        }
        guard sent, PQputCopyEnd(handle, nil) == 1 else {
            throw PostgresError(code: .connectionLost, message: errorMessage(handle), query: sql)
        }
        var copied = 0
        var firstError: PostgresError?
        while let result = PQgetResult(handle) {
            defer { PQclear(result) }
            if PQresultStatus(result) == PGRES_COMMAND_OK {
                copied = PQcmdTuples(result).map { Int(String(cString: $0)) ?? 0 } ?? 0
            } else if firstError == nil {
                firstError = serverError(result, handle: handle, sql: sql)
            }
        }
        if let firstError { throw firstError }
        return copied
    }
}

/// Rows in the text format of COPY: fields separated by tabs, rows ended by
/// newlines, `\N` for NULL, and a backslash escaping the backslash, tab,
/// newline and carriage return inside a value.
public struct CopyTextRows: Sendable {
    public private(set) var bytes: [UInt8] = []
    public private(set) var count = 0
    private var isRowStart = true

    public init(reservingCapacity capacity: Int = 0) {
        bytes.reserveCapacity(capacity)
    }

    public var isEmpty: Bool { count == 0 }

    public mutating func append(_ text: String) {
        startField()
        var text = text
        text.withUTF8 { utf8 in
            // Most values need no escape: copy them whole.
            guard utf8.contains(where: Self.needsEscape) else { return bytes.append(contentsOf: utf8) }
            for byte in utf8 { appendEscaped(byte) }
        }
    }

    public mutating func append(_ text: String?) {
        if let text { append(text) } else { appendNull() }
    }

    public mutating func append(_ flag: Bool) {
        startField()
        bytes.append(flag ? UInt8(ascii: "t") : UInt8(ascii: "f"))
    }

    /// A `text[]` value: every element quoted, so none reads as NULL or splits.
    public mutating func append(array elements: [String]) {
        startField()
        bytes.append(UInt8(ascii: "{"))
        for (index, element) in elements.enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            bytes.append(UInt8(ascii: "\""))
            for byte in element.utf8 {
                // The array literal's own escapes, then COPY's.
                if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") { appendEscaped(UInt8(ascii: "\\")) }
                appendEscaped(byte)
            }
            bytes.append(UInt8(ascii: "\""))
        }
        bytes.append(UInt8(ascii: "}"))
    }

    public mutating func appendNull() {
        startField()
        bytes.append(UInt8(ascii: "\\"))
        bytes.append(UInt8(ascii: "N"))
    }

    /// A field written by `write` as it is: for text that never needs an
    /// escape (numbers, timestamps), formatted straight into the buffer.
    public mutating func appendVerbatim(_ write: (inout [UInt8]) -> Void) {
        startField()
        write(&bytes)
    }

    public mutating func endRow() {
        bytes.append(UInt8(ascii: "\n"))
        count += 1
        isRowStart = true
    }

    private mutating func startField() {
        if !isRowStart { bytes.append(UInt8(ascii: "\t")) }
        isRowStart = false
    }

    private static func needsEscape(_ byte: UInt8) -> Bool {
        byte == UInt8(ascii: "\\") || byte == UInt8(ascii: "\t") || byte == UInt8(ascii: "\n") || byte == UInt8(ascii: "\r")
    }

    private mutating func appendEscaped(_ byte: UInt8) {
        switch byte {
        case UInt8(ascii: "\\"): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
        case UInt8(ascii: "\t"): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
        case UInt8(ascii: "\n"): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
        case UInt8(ascii: "\r"): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
        default: bytes.append(byte)
        }
    }
}
