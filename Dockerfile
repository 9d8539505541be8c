# karpool image: a static binary on distroless, running as the nonroot user.
# There is no Docker engine on the development machines; this file is kept plain and conventional.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY api/ api/
COPY cmd/ cmd/
COPY config/ config/
COPY internal/ internal/
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/karpool ./cmd/karpool

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/karpool /karpool
USER 65532:65532
ENTRYPOINT ["/karpool"]
