import Hummingbird

/// `GET /openapi.yaml`: the API described for clients and generators. No key.
struct OpenAPIController {
    func addRoutes(to router: Router<AppRequestContext>) {
        router.get("openapi.yaml") { _, _ in
            Response(status: .ok, headers: [.contentType: "application/yaml"],
                     body: .init(byteBuffer: ByteBuffer(string: OpenAPIDocument.yaml)))
        }
    }
}

/// The OpenAPI 3.1 document of the whole API (PRODUCT.md's contract). Kept
/// beside the controllers so a change to a route shows up in the same diff;
/// `OpenAPITests` checks the routes served here are described.
enum OpenAPIDocument {
    static let yaml = #"""
openapi: 3.1.0
info:
  title: Subledger
  version: "1"
  description: >
    An event-sourced ledger of App Store purchases and subscriptions. Times are
    RFC 3339 UTC. Errors are {"error": {"code", "message", "field"}}.
servers:
  - url: http://127.0.0.1:8080
security:
  - apiKey: []
tags:
  - name: subscribers
  - name: support
  - name: products
  - name: appstore
  - name: operations
paths:
  /v1/subscribers/{subscriberId}/events:
    post:
      tags: [subscribers]
      summary: Record one fact (role ingest or admin)
      parameters: [{$ref: "#/components/parameters/SubscriberId"}]
      requestBody:
        required: true
        content:
          application/json:
            schema: {$ref: "#/components/schemas/Fact"}
      responses:
        "201":
          description: Recorded
          content:
            application/json:
              schema: {$ref: "#/components/schemas/Recorded"}
        "200":
          description: Already recorded (duplicate); answered as the first time
          content:
            application/json:
              schema: {$ref: "#/components/schemas/Recorded"}
        "400": {$ref: "#/components/responses/BadRequest"}
        "401": {$ref: "#/components/responses/Unauthorized"}
        "403": {$ref: "#/components/responses/Forbidden"}
        "404": {$ref: "#/components/responses/NotFound"}
        "409": {$ref: "#/components/responses/Conflict"}
        "413": {$ref: "#/components/responses/TooLarge"}
        "422": {$ref: "#/components/responses/RuleViolation"}
        "503": {$ref: "#/components/responses/Busy"}
  /v1/subscribers/{subscriberId}/restore:
    post:
      tags: [subscribers]
      summary: Restore transactions onto a device (role ingest or admin)
      parameters: [{$ref: "#/components/parameters/SubscriberId"}]
      requestBody:
        required: true
        content:
          application/json:
            schema: {$ref: "#/components/schemas/Restore"}
      responses:
        "200":
          description: Everything the subscriber may unlock
          content:
            application/json:
              schema: {$ref: "#/components/schemas/SubscriberState"}
        "400": {$ref: "#/components/responses/BadRequest"}
        "401": {$ref: "#/components/responses/Unauthorized"}
        "403": {$ref: "#/components/responses/Forbidden"}
        "409": {$ref: "#/components/responses/Conflict"}
        "413": {$ref: "#/components/responses/TooLarge"}
        "422": {$ref: "#/components/responses/RuleViolation"}
        "503": {$ref: "#/components/responses/Busy"}
  /v1/subscribers/{subscriberId}/receipts:
    post:
      tags: [subscribers]
      summary: Validate an app receipt with the App Store and record its transactions (role ingest or admin)
      parameters: [{$ref: "#/components/parameters/SubscriberId"}]
      requestBody:
        required: true
        content:
          application/json:
            schema:
              type: object
              required: [receiptData]
              properties:
                receiptData: {type: string, description: Base64 app receipt}
                deviceId: {type: string}
      responses:
        "200":
          description: The subscriber's state after the receipt's transactions
          content:
            application/json:
              schema: {$ref: "#/components/schemas/SubscriberState"}
        "400": {$ref: "#/components/responses/BadRequest"}
        "401": {$ref: "#/components/responses/Unauthorized"}
        "403": {$ref: "#/components/responses/Forbidden"}
        "413": {$ref: "#/components/responses/TooLarge"}
        "422":
          description: >-
            The App Store refused the receipt (receipt_invalid, receipt_shared_secret_mismatch,
            receipt_environment_mismatch, receipt_account_not_found, receipt_malformed, receipt_rejected)
          content:
            application/json:
              schema: {$ref: "#/components/schemas/Error"}
        "502":
          description: The App Store did not answer usably (appstore_unreachable)
          content:
            application/json:
              schema: {$ref: "#/components/schemas/Error"}
        "503":
          description: The App Store stayed temporarily unavailable after retries (appstore_unavailable)
          content:
            application/json:
              schema: {$ref: "#/components/schemas/Error"}
  /v1/subscribers/{subscriberId}:
    get:
      tags: [subscribers]
      summary: A subscriber's state, now or at an instant (any role)
      parameters:
        - {$ref: "#/components/parameters/SubscriberId"}
        - {$ref: "#/components/parameters/At"}
      responses:
        "200":
          description: The state
          content:
            application/json:
              schema: {$ref: "#/components/schemas/SubscriberState"}
        "400": {$ref: "#/components/responses/BadRequest"}
        "401": {$ref: "#/components/responses/Unauthorized"}
        "404": {$ref: "#/components/responses/NotFound"}
  /v1/subscribers/{subscriberId}/history:
    get:
      tags: [subscribers]
      summary: Every event of the subscriber, in order (any role)
      parameters: [{$ref: "#/components/parameters/SubscriberId"}]
      responses:
        "200":
          description: The history
          content:
            application/json:
              schema:
                type: object
                required: [events]
                properties:
                  events:
                    type: array
                    items: {$ref: "#/components/schemas/HistoryEvent"}
        "400": {$ref: "#/components/responses/BadRequest"}
        "401": {$ref: "#/components/responses/Unauthorized"}
        "404": {$ref: "#/components/responses/NotFound"}
  /v1/subscribers/{subscriberId}/explain:
    get:
      tags: [subscribers]
      summary: Why each entitlement is or is not active (any role)
      parameters:
        - {$ref: "#/components/parameters/SubscriberId"}
        - {$ref: "#/components/parameters/At"}
      responses:
        "200":
          description: The explanation
          content:
            application/json:
              schema: {$ref: "#/components/schemas/Explanation"}
        "400": {$ref: "#/components/responses/BadRequest"}
        "401": {$ref: "#/components/responses/Unauthorized"}
        "404": {$ref: "#/components/responses/NotFound"}
  /v1/transactions/{transactionId}:
    get:
      tags: [support]
      summary: Owner and facts of a transaction, by transaction id or original transaction id (role support or admin)
      parameters:
        - name: transactionId
          in: path
          required: true
          schema: {type: string}
      responses:
        "200":
          description: The owner and the facts
          content:
            application/json:
              schema:
                type: object
                required: [transactionId, originalTransactionId, subscriberId, facts]
                properties:
                  transactionId: {type: string}
                  originalTransactionId: {type: string}
                  subscriberId: {type: string, description: The subscriber holding the original transaction now}
                  facts:
                    type: array
                    items:
                      allOf:
                        - {$ref: "#/components/schemas/HistoryEvent"}
                        - type: object
                          properties:
                            subscriberId: {type: string}
        "401": {$ref: "#/components/responses/Unauthorized"}
        "403": {$ref: "#/components/responses/Forbidden"}
        "404": {$ref: "#/components/responses/NotFound"}
  /v1/reminders:
    get:
      tags: [support]
      summary: Reminders across subscribers, ordered by dueAt (role support or admin)
      parameters:
        - name: status
          in: query
          schema: {type: string, enum: [pending, sent, cancelled, skipped]}
        - name: dueBefore
          in: query
          schema: {type: string, format: date-time}
      responses:
        "200":
          description: The reminders
          content:
            application/json:
              schema:
                type: object
                properties:
                  reminders:
                    type: array
                    items:
                      allOf:
                        - {$ref: "#/components/schemas/Reminder"}
                        - type: object
                          properties:
                            subscriberId: {type: string}
        "400": {$ref: "#/components/responses/BadRequest"}
        "401": {$ref: "#/components/responses/Unauthorized"}
        "403": {$ref: "#/components/responses/Forbidden"}
  /v1/products:
    get:
      tags: [products]
      summary: The catalog's product identifiers, for apps (no key)
      security: []
      parameters:
        - {name: If-None-Match, in: header, schema: {type: string}}
        - {name: If-Modified-Since, in: header, schema: {type: string}}
      responses:
        "200":
          description: The identifiers, in catalog order
          headers:
            ETag: {schema: {type: string}}
            Last-Modified: {schema: {type: string}}
          content:
            application/json:
              schema: {type: array, items: {type: string}}
        "304":
          description: The client's copy is current
  /v1/products_v1.json:
    # A stable alias: the same operation as /v1/products.
    $ref: "#/paths/~1v1~1products"
  /v1/products/invalid:
    post:
      tags: [products]
      summary: Report identifiers the store said are invalid on a device (role ingest or admin)
      requestBody:
        required: true
        content:
          application/json:
            schema:
              type: object
              required: [identifiers]
              properties:
                identifiers: {type: array, minItems: 1, maxItems: 1000, items: {type: string}}
                deviceId: {type: string}
      responses:
        "201":
          description: Stored
          content:
            application/json:
              schema:
                type: object
                properties:
                  recorded: {type: integer}
        "400": {$ref: "#/components/responses/BadRequest"}
        "401": {$ref: "#/components/responses/Unauthorized"}
        "403": {$ref: "#/components/responses/Forbidden"}
        "413": {$ref: "#/components/responses/TooLarge"}
    get:
      tags: [support]
      summary: Reported invalid identifiers, most recent first (role support or admin)
      responses:
        "200":
          description: One entry per identifier
          content:
            application/json:
              schema:
                type: object
                properties:
                  identifiers:
                    type: array
                    items:
                      type: object
                      properties:
                        identifier: {type: string}
                        inCatalog: {type: boolean}
                        reports: {type: integer}
                        devices: {type: integer}
                        firstReportedAt: {type: string, format: date-time}
                        lastReportedAt: {type: string, format: date-time}
        "401": {$ref: "#/components/responses/Unauthorized"}
        "403": {$ref: "#/components/responses/Forbidden"}
  /v1/appstore/notifications:
    post:
      tags: [appstore]
      summary: App Store Server Notifications V2 (no key; the signature authenticates)
      security: []
      requestBody:
        required: true
        content:
          application/json:
            schema:
              type: object
              required: [signedPayload]
              properties:
                signedPayload: {type: string, description: JWS signed by Apple}
      responses:
        "200":
          description: The facts are durably stored (or already were)
        "400":
          description: >-
            Bad JSON, or the signature, its certificate chain, the bundle id or a nested
            signed payload does not verify (code says which); nothing is stored
          content:
            application/json:
              schema: {$ref: "#/components/schemas/Error"}
        "413": {$ref: "#/components/responses/TooLarge"}
        "503":
          description: The App Store integration is not configured (appstore_not_configured)
          content:
            application/json:
              schema: {$ref: "#/components/schemas/Error"}
  /health:
    get:
      tags: [operations]
      summary: Liveness and readiness (database reachable, projection lag); no key
      security: []
      responses:
        "200":
          description: Ready
          content:
            application/json:
              schema:
                type: object
                properties:
                  status: {type: string}
                  database: {type: string}
                  projections: {type: object, additionalProperties: {type: integer}}
        "503":
          description: Not ready
  /metrics:
    get:
      tags: [operations]
      summary: Prometheus metrics; no key
      security: []
      responses:
        "200":
          description: Prometheus text format
          content:
            text/plain: {schema: {type: string}}
  /openapi.yaml:
    get:
      tags: [operations]
      summary: This document; no key
      security: []
      responses:
        "200":
          description: OpenAPI 3.1
          content:
            application/yaml: {schema: {type: string}}
components:
  securitySchemes:
    apiKey:
      type: http
      scheme: bearer
      description: "SUBLEDGER_API_KEYS = role:key,... with roles ingest, support, admin"
  parameters:
    SubscriberId:
      name: subscriberId
      in: path
      required: true
      description: 1 to 200 characters, no control characters (percent-encoded in the path)
      schema: {type: string, minLength: 1, maxLength: 200}
    At:
      name: at
      in: query
      description: The instant to evaluate at (RFC 3339); default now
      schema: {type: string, format: date-time}
  responses:
    BadRequest:
      description: Bad JSON or a bad field; the message names the field and what was expected
      content:
        application/json:
          schema: {$ref: "#/components/schemas/Error"}
    Unauthorized:
      description: No API key, or not a valid one
      content:
        application/json:
          schema: {$ref: "#/components/schemas/Error"}
    Forbidden:
      description: The key's role may not do this
      content:
        application/json:
          schema: {$ref: "#/components/schemas/Error"}
    NotFound:
      description: Unknown subscriber or transaction
      content:
        application/json:
          schema: {$ref: "#/components/schemas/Error"}
    Conflict:
      description: Conflicts with what is recorded (owned_by_other_subscriber, transaction_conflict)
      content:
        application/json:
          schema: {$ref: "#/components/schemas/Error"}
    TooLarge:
      description: The body is over 1 MiB
      content:
        application/json:
          schema: {$ref: "#/components/schemas/Error"}
    RuleViolation:
      description: Well-formed but against a rule (unknown_product, not_restorable, not_renewable)
      content:
        application/json:
          schema: {$ref: "#/components/schemas/Error"}
    Busy:
      description: Too many concurrent writes to one subscriber; retry
      content:
        application/json:
          schema: {$ref: "#/components/schemas/Error"}
  schemas:
    Error:
      type: object
      required: [error]
      properties:
        error:
          type: object
          required: [code, message]
          properties:
            code: {type: string}
            message: {type: string}
            field: {type: string}
    Fact:
      type: object
      required: [type]
      properties:
        type: {type: string, enum: [purchase, renewal, restore, refund, expiry, autoRenewChange, billingIssue]}
        transactionId: {type: string}
        originalTransactionId: {type: string}
        productId: {type: string}
        purchaseDate: {type: string, format: date-time}
        expiresDate: {type: string, format: date-time}
        revocationDate: {type: string, format: date-time}
        gracePeriodExpiresDate: {type: string, format: date-time}
        effectiveDate: {type: string, format: date-time}
        reason: {type: string}
        autoRenew: {type: boolean}
        environment: {type: string, enum: [Production, Sandbox]}
        deviceId: {type: string}
        quantity: {type: integer, minimum: 1}
    Restore:
      type: object
      required: [transactions]
      properties:
        deviceId: {type: string}
        environment: {type: string, enum: [Production, Sandbox]}
        transactions:
          type: array
          maxItems: 1000
          items:
            type: object
            required: [transactionId, productId, purchaseDate]
            properties:
              transactionId: {type: string}
              originalTransactionId: {type: string}
              productId: {type: string}
              purchaseDate: {type: string, format: date-time}
              expiresDate: {type: string, format: date-time}
              environment: {type: string, enum: [Production, Sandbox]}
    Recorded:
      type: object
      required: [position, duplicate, subscriber]
      properties:
        position: {type: integer}
        duplicate: {type: boolean}
        subscriber: {$ref: "#/components/schemas/SubscriberState"}
    Reminder:
      type: object
      properties:
        id: {type: string}
        dueAt: {type: string, format: date-time}
        lead: {type: string, description: ISO 8601 duration}
        status: {type: string, enum: [pending, sent, cancelled, skipped]}
    SubscriberState:
      type: object
      required: [subscriberId, at, entitlements, subscriptions, nonRenewingPeriods, purchases, devices, reminders]
      properties:
        subscriberId: {type: string}
        at: {type: string, format: date-time}
        entitlements:
          type: array
          items:
            type: object
            properties:
              id: {type: string}
              active: {type: boolean}
              productId: {type: string}
              expiresAt: {type: [string, "null"], format: date-time}
              source: {type: string, description: The transactionId that grants it}
        subscriptions:
          type: array
          items:
            type: object
            properties:
              group: {type: string}
              productId: {type: string}
              type: {type: string, enum: [auto-renewable, non-renewing]}
              status: {type: string, enum: [active, grace, expired, revoked]}
              expiresAt: {type: [string, "null"], format: date-time}
              autoRenew: {type: boolean}
              originalTransactionId: {type: string}
        nonRenewingPeriods:
          type: array
          items:
            type: object
            properties:
              group: {type: string}
              productId: {type: string}
              transactionId: {type: string}
              start: {type: string, format: date-time}
              end: {type: string, format: date-time}
        purchases:
          type: array
          items:
            type: object
            properties:
              transactionId: {type: string}
              originalTransactionId: {type: string}
              productId: {type: string}
              type: {type: string, enum: [consumable, non-consumable, free]}
              purchaseDate: {type: string, format: date-time}
              quantity: {type: integer}
              revokedAt: {type: [string, "null"], format: date-time}
        devices:
          type: array
          items:
            type: object
            properties:
              id: {type: string}
              firstSeenAt: {type: string, format: date-time}
        reminders:
          type: array
          items: {$ref: "#/components/schemas/Reminder"}
    HistoryEvent:
      type: object
      required: [position, type, recordedAt, data, summary]
      properties:
        position: {type: integer}
        type:
          type: string
          description: purchased, renewed, restored, refunded, expired, auto_renew_changed, billing_issue, transferred_in, transferred_out, device_seen, reminder_sent, reminder_failed
        recordedAt: {type: string, format: date-time}
        data: {type: object}
        source: {type: string, description: api, import, appstore or subledger}
        summary: {type: string}
    Explanation:
      type: object
      properties:
        subscriberId: {type: string}
        at: {type: string, format: date-time}
        entitlements:
          type: array
          items:
            type: object
            properties:
              id: {type: string}
              active: {type: boolean}
              reasons: {type: array, items: {type: string}}
              positions: {type: array, items: {type: integer}}
              transactionIds: {type: array, items: {type: string}}
        neverGranted: {type: array, items: {type: string}}
"""#
}
