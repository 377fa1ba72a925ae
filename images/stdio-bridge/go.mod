module github.com/codemode-operator/codemode-operator/images/stdio-bridge

go 1.26
