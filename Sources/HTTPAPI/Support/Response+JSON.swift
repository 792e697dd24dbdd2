import Foundation
import Hummingbird
import SubledgerApp
import Ledger

extension Response {
    /// A JSON response from already-encoded bytes.
    static func json(_ data: Data, status: HTTPResponse.Status = .ok, headers: HTTPFields = [:]) -> Response {
        var fields = headers
        fields[.contentType] = "application/json"
        return Response(status: status, headers: fields, body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }

    /// A JSON response from already-encoded bytes.
    public static func json(bytes: [UInt8], status: HTTPResponse.Status = .ok) -> Response {
        Response(status: status, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
    }

    /// A subscriber's state, written by hand (`SubscriberState.encodedJSON`):
    /// the bytes the generic encoder writes, at a fraction of its cost.
    static func json(_ state: SubscriberState, status: HTTPResponse.Status = .ok) -> Response {
        json(bytes: state.encodedJSON(), status: status)
    }

    /// A JSON response of an `Encodable` value, with the ledger's date format.
    static func json(_ value: some Encodable, status: HTTPResponse.Status = .ok, headers: HTTPFields = [:]) throws -> Response {
        json(try LedgerJSON.makeEncoder().encode(value), status: status, headers: headers)
    }
}
