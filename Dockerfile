# karpool image: a static binary on distroless, running as the nonroot user.
# `make test` reproduces the build stage without a Docker engine (cmd/karpool/dockerfile_test.go):
# it copies what the COPY lines name, minus .dockerignore, and runs the RUN lines there.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
# Every package the binary imports, and the examples it embeds (`karpool up`).
COPY api/ api/
COPY autoscaler/ autoscaler/
COPY cmd/ cmd/
COPY config/ config/
COPY examples/ examples/
COPY internal/ internal/
COPY manifests/ manifests/
COPY reconciler/ reconciler/
COPY schema/ schema/
# `karpool up` and `karpool awssim` run the local environment from testbed/; nothing else imports it.
COPY testbed/ testbed/
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o out/karpool ./cmd/karpool

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /src/out/karpool /karpool
USER 65532:65532
ENTRYPOINT ["/karpool"]
